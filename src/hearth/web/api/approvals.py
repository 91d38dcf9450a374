"""Routes for approvals: what waits on the owner, and the owner's answers."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import AppName

router = APIRouter()


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["allow_once", "allow_always", "deny"]
    prefix: str | None = Field(None, min_length=1, max_length=500,
                               description="allow_always only: a path or command prefix")


@router.get("/api/approvals")
async def list_approvals(engine: EngineDep, app: AppName) -> dict[str, Any]:
    """What waits on the owner (for an app: in the chats it started, which it cannot answer)."""
    waiting = await engine.desk.pending()
    if app is not None:
        own = await engine.reads.own_keys(app, {item["session"] for item in waiting})
        waiting = [item for item in waiting if item["session"] in own]
    return {"approvals": waiting}


@router.post("/api/approvals/{approval_id}")
async def answer_approval(approval_id: str, body: Answer, engine: EngineDep) -> dict[str, Any]:
    prefix = body.prefix if body.decision == "allow_always" else None
    return await engine.desk.decide(approval_id, body.decision, prefix)
