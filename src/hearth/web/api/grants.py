"""Routes for standing grants (the "Always" answers to approvals): list them, revoke one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from hearth.web.http.deps import EngineDep

router = APIRouter()
MAX_ID = 2**62  # ids are SQLite integers; larger is no grant


@router.get("/api/grants")
async def list_grants(engine: EngineDep) -> dict[str, Any]:
    """Every standing grant, newest first."""
    return {"grants": await engine.reads.grants()}


@router.delete("/api/grants/{grant_id}")
async def revoke_grant(grant_id: Annotated[int, Path(ge=1, le=MAX_ID)],
                       engine: EngineDep) -> dict[str, Any]:
    """Revoke one: the next call it covered is asked about again."""
    return {"revoked": await engine.access.revoke_grant(grant_id)}
