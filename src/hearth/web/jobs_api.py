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

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hearth.engine import jobs
from hearth.engine.jobs import MAX_MINUTES, MAX_PROMPT, JobRow, describe
from hearth.engine.views import iso
from hearth.web.deps import EngineDep, SessionHeader

router = APIRouter()
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


@router.get("/api/jobs")
async def list_jobs(engine: EngineDep, session: SessionHeader = None) -> dict[str, Any]:
    found = await asyncio.to_thread(jobs.listing, engine.db, session)
    return {"jobs": [job_view(job) for job in found]}


@router.post("/api/jobs")
async def make_job(body: NewJob, engine: EngineDep,
                   session: SessionHeader = None) -> JSONResponse:
    job = await asyncio.to_thread(jobs.make, engine.db, prompt=body.prompt,
                                  in_minutes=body.in_minutes, every_minutes=body.every_minutes,
                                  session=session, route="POST /api/jobs")
    return JSONResponse(job_view(job), status_code=201)


@router.patch("/api/jobs/{job_id}")
async def change_job(job_id: JobId, body: JobChange, engine: EngineDep,
                     session: SessionHeader = None) -> dict[str, Any]:
    return job_view(await asyncio.to_thread(jobs.change, engine.db, job_id, body.enabled,
                                            session, "PATCH /api/jobs"))


@router.delete("/api/jobs/{job_id}")
async def delete_job(job_id: JobId, engine: EngineDep,
                     session: SessionHeader = None) -> dict[str, Any]:
    await asyncio.to_thread(jobs.delete, engine.db, job_id, session, "DELETE /api/jobs")
    return {"deleted": job_id}
