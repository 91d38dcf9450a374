"""Routes that branch a chat (regenerate, edit and resend, rewind, choose a variant, fork) and
its map.

A message is addressed by `index`, its place in the chat's visible list (the `visible_index`
of `GET /api/sessions/{key}`'s messages). A door that would run a turn again whose attempt
began a step that may have changed something answers 409 `retry_repeats_steps` with the steps
and a `confirm` value; the same request with that value goes ahead.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from hearth.engine.intake.admission import Admitted
from hearth.engine.operations.branching import Moved
from hearth.engine.views import session_view
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import PrincipalDep

router = APIRouter()
Index = Field(ge=0, le=10_000_000)
Confirm = Field(None, max_length=100)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegenerateBody(Body):
    index: int | None = Field(None, ge=0, le=10_000_000)  # None: the last answer
    confirm: str | None = Confirm


class EditBody(Body):
    index: int = Index
    text: str = Field(max_length=100_000)
    confirm: str | None = Confirm


class RewindBody(Body):
    index: int = Index
    confirm: str | None = Confirm


class VariantBody(Body):
    index: int = Index
    variant: int = Field(ge=0, le=10_000)


class ForkBody(Body):
    index: int = Index
    memory_mode: str | None = Field(None, max_length=20)


@router.post("/api/sessions/{key}/regenerate")
async def regenerate(key: str, engine: EngineDep, body: RegenerateBody | None = None
                     ) -> JSONResponse:
    """Answer again: a completed answer is kept as a variant, one that did not complete is
    retried in its place."""
    body = body or RegenerateBody()
    return _started(await engine.regenerate(key, body.index, body.confirm))


@router.post("/api/sessions/{key}/edit")
async def edit(key: str, body: EditBody, engine: EngineDep,
               principal: PrincipalDep) -> JSONResponse:
    """Send new words in place of one of the owner's messages (a new branch from its parent)."""
    return _started(await engine.edit(key, body.index, body.text, body.confirm,
                                      principal=principal))


@router.post("/api/sessions/{key}/rewind")
async def rewind(key: str, body: RewindBody, engine: EngineDep) -> dict[str, Any]:
    """Move the head back to a message; one of the owner's is answered again."""
    return _moved(await engine.rewind(key, body.index, body.confirm))


@router.post("/api/sessions/{key}/variant")
async def choose_variant(key: str, body: VariantBody, engine: EngineDep) -> dict[str, Any]:
    """Show another variant of a message (from 0); the choice is what the model reads next."""
    return _moved(await engine.choose_variant(key, body.index, body.variant))


@router.post("/api/sessions/{key}/fork")
async def fork(key: str, body: ForkBody, engine: EngineDep) -> JSONResponse:
    """A new chat with this one's messages up to `index`."""
    made = await engine.fork(key, body.index, body.memory_mode)
    return JSONResponse({"key": made.key, "session": session_view(made)}, status_code=201)


@router.get("/api/sessions/{key}/map")
async def chat_map(key: str, engine: EngineDep) -> dict[str, Any]:
    """The chat's marks, in order: each message of the owner's, each turn's answer (with its
    telemetry), each tool call, decided approval and error, with the `visibleIndex` to jump to."""
    return {"marks": await engine.reads.chat_map(key)}


def _started(admitted: Admitted) -> JSONResponse:
    return JSONResponse({"run_id": admitted.run_id, "status": admitted.status,
                         "seq": admitted.seq}, status_code=202)


def _moved(moved: Moved) -> dict[str, Any]:
    run_id = moved.admitted.run_id if moved.admitted is not None else None
    return {"head_index": moved.head_index, "run_id": run_id}
