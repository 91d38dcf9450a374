"""Routes for scheduled jobs: list them, schedule one, pause or resume it, delete it.

A request is the owner's unless it names a chat with `X-Hearth-Session: <key>` (an unknown
chat answers 404 `session_not_found`). A job outlasts the chat that asks for it, so a chat that
keeps nothing (Incognito, Temporary, or one whose mode cannot be read) may not make, change or
delete one: 403 `restricted_session` with the one sentence saying so, an audit row
`job.refused`, and nothing changed. Audit rows name jobs, never their prompts.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hearth.engine.runtime import Engine
from hearth.engine.views import iso
from hearth.errors import Refusal
from hearth.privacy import reach
from hearth.privacy.modes import mode_of
from hearth.sessions import chats
from hearth.store import audit
from hearth.store import jobs as job_store
from hearth.store.db import Database, now
from hearth.store.jobs import JobRow
from hearth.tools.jobs import MAX_MINUTES, MAX_PROMPT, WHAT, BadSchedule, describe, schedule
from hearth.web.deps import SessionHeader, engine_of

router = APIRouter()
EngineDep = Annotated[Engine, Depends(engine_of)]
MAX_ID = 2**62  # ids are SQLite integers; larger is no job
JobId = Annotated[int, Path(ge=1, le=MAX_ID)]
Minutes = Annotated[int | None, Field(strict=True, ge=1, le=MAX_MINUTES)]


class NewJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT, pattern=r"\S")
    in_minutes: Minutes = None
    every_minutes: Minutes = None

    @model_validator(mode="after")
    def _one_schedule(self) -> NewJob:
        if (self.in_minutes is None) == (self.every_minutes is None):
            raise ValueError("give exactly one of in_minutes (run once) or every_minutes "
                             "(repeat)")
        return self


class JobChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(strict=True)


def job_view(job: JobRow) -> dict[str, Any]:
    return {
        "id": job.id,
        "prompt": job.prompt,
        "schedule": describe(job),
        "every_minutes": None if job.every_seconds is None else job.every_seconds // 60,
        "next_at": iso(job.next_at),
        "enabled": job.enabled,
        "session_key": job.session_key,
        "made_by": job.made_by,
        "created_at": iso(job.created_at),
        "last_fired_at": iso(job.last_fired_at),
    }


def _not_found(job_id: int) -> Refusal:
    return Refusal("job_not_found", 404, f"There is no job #{job_id}.")


def _may_change(db: Database, session: str | None, what: str, route: str) -> str:
    """Who the change is made for ("owner" or the chat's key), refusing a chat whose mode
    keeps nothing (audited, the request's words left out)."""
    if session is None:
        return "owner"
    chat = chats.get_chat(db, session)
    mode = mode_of(chat.memory_mode)
    refused = reach.lasting_refusal(what, mode)
    if refused is None:
        return chat.key
    with db.write(durable=False) as conn:
        audit.write(conn, "job.refused", actor="privacy", session_key=chat.key,
                    detail={"route": route, "mode": mode.value,
                            "reason": "the chat keeps nothing"})
    raise reach.RestrictedSession(refused)


def _list(db: Database, session: str | None) -> list[JobRow]:
    if session is not None:
        chats.get_chat(db, session)  # 404 for a chat that is not there
    with db.read() as conn:
        return job_store.list_all(conn)


def _make(db: Database, body: NewJob, session: str | None) -> JobRow:
    made_by = _may_change(db, session, WHAT, "POST /api/jobs")
    try:
        return schedule(db, prompt=body.prompt, in_minutes=body.in_minutes,
                        every_minutes=body.every_minutes, made_by=made_by, actor="owner")
    except BadSchedule as bad:
        raise Refusal("invalid_request", 422, bad.sentence) from bad


def _delete(db: Database, job_id: int, session: str | None) -> None:
    by = _may_change(db, session, f"the deletion of job #{job_id}", "DELETE /api/jobs")
    with db.write() as conn:
        if not job_store.delete(conn, job_id):
            raise _not_found(job_id)
        audit.write(conn, "job.deleted", actor="owner",
                    session_key=None if by == "owner" else by, detail={"job": job_id})


def _change(db: Database, job_id: int, body: JobChange, session: str | None) -> JobRow:
    by = _may_change(db, session, f"the change to job #{job_id}", "PATCH /api/jobs")
    with db.write() as conn:
        job = job_store.get(conn, job_id)
        if job is None:
            raise _not_found(job_id)
        if body.enabled and job.once and job.last_fired_at is not None:
            raise Refusal("job_finished", 409,
                          f"Job #{job_id} ran once and is done; schedule a new one to run it "
                          "again.")
        changed = job_store.set_enabled(conn, job_id, body.enabled, now())
        assert changed is not None
        audit.write(conn, "job.changed", actor="owner",
                    session_key=None if by == "owner" else by,
                    detail={"job": job_id, "enabled": body.enabled})
    return changed


@router.get("/api/jobs")
async def list_jobs(engine: EngineDep, session: SessionHeader = None) -> dict[str, Any]:
    found = await asyncio.to_thread(_list, engine.db, session)
    return {"jobs": [job_view(job) for job in found]}


@router.post("/api/jobs")
async def make_job(body: NewJob, engine: EngineDep,
                   session: SessionHeader = None) -> JSONResponse:
    job = await asyncio.to_thread(_make, engine.db, body, session)
    return JSONResponse(job_view(job), status_code=201)


@router.patch("/api/jobs/{job_id}")
async def change_job(job_id: JobId, body: JobChange, engine: EngineDep,
                     session: SessionHeader = None) -> dict[str, Any]:
    return job_view(await asyncio.to_thread(_change, engine.db, job_id, body, session))


@router.delete("/api/jobs/{job_id}")
async def delete_job(job_id: JobId, engine: EngineDep,
                     session: SessionHeader = None) -> dict[str, Any]:
    await asyncio.to_thread(_delete, engine.db, job_id, session)
    return {"deleted": job_id}
