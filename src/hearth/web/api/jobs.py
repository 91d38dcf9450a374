"""Routes for scheduled jobs: list them, schedule one (every N minutes, in N minutes, a cron
expression in a time zone, or at a time), run one now, pause or resume it, delete it.

A request is the owner's unless it names a chat with `X-Hearth-Session: <key>` (an unknown
chat answers 404 `session_not_found`). A job outlasts the chat that asks for it, so a chat that
keeps nothing (Incognito, Temporary, or one whose mode cannot be read) may not make, change or
delete one: 403 `restricted_session` with the one sentence saying so, an audit row
`job.refused`, and nothing changed. Audit rows name jobs, never their prompts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hearth.engine.background import jobs, schedules
from hearth.engine.background.jobs import MAX_MINUTES, MAX_PROMPT, JobRow, describe
from hearth.engine.runtime import Engine
from hearth.engine.views import iso
from hearth.web.http import quotas
from hearth.web.http.deps import EngineDep, SessionHeader
from hearth.web.http.permissions import AppName, PrincipalDep
from hearth.web.http.quotas import QuotasDep

router = APIRouter()
MAX_ID = 2**62  # ids are SQLite integers; larger is no job
JobId = Annotated[int, Path(ge=1, le=MAX_ID)]
Minutes = Annotated[int | None, Field(strict=True, ge=1, le=MAX_MINUTES)]


class NewJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT, pattern=r"\S")
    in_minutes: Minutes = None
    every_minutes: Minutes = None
    cron: str | None = Field(default=None, max_length=schedules.MAX_CRON)
    at: str | None = Field(default=None, max_length=64)
    timezone: str | None = Field(default=None, max_length=64)
    missed: Literal["once", "skip"] = "once"

    @model_validator(mode="after")
    def _one_schedule(self) -> NewJob:
        given = [k for k in ("in_minutes", "every_minutes", "cron", "at")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of in_minutes (run once), every_minutes "
                             "(repeat), cron (repeat, with timezone) or at (run once at a "
                             "time)")
        return self

    def request(self) -> dict[str, object]:
        return self.model_dump(exclude={"prompt"})


class JobChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(strict=True)


def job_view(job: JobRow) -> dict[str, Any]:
    return {
        "id": job.id,
        "prompt": job.prompt,
        "schedule": describe(job),
        "kind": "cron" if job.cron else ("every" if job.every_seconds else "once"),
        "every_minutes": None if job.every_seconds is None else job.every_seconds // 60,
        "cron": job.cron,
        "timezone": job.timezone,
        "missed": job.missed,
        "next_at": iso(job.next_at),
        "enabled": job.enabled,
        "session_key": job.session_key,
        "made_by": job.made_by,
        "created_at": iso(job.created_at),
        "last_fired_at": iso(job.last_fired_at),
    }


@router.get("/api/jobs")
async def list_jobs(engine: EngineDep, app: AppName,
                    session: SessionHeader = None) -> dict[str, Any]:
    await _for_app(engine, app, session)
    found = await engine.jobs.listing(session)
    return {"jobs": [job_view(job) for job in (jobs.made_in(found, session) if app else found)]}


async def _for_app(engine: Engine, app: str | None, session: str | None,
                   job_id: int | None = None) -> None:
    """An app reaches only the jobs a chat of its own made (`jobs.app_scope`)."""
    if app is not None:
        await engine.jobs.app_scope(session, job_id)


@router.post("/api/jobs")
async def make_job(body: NewJob, engine: EngineDep, app: AppName, principal: PrincipalDep,
                   held: QuotasDep, session: SessionHeader = None) -> JSONResponse:
    await _for_app(engine, app, session)
    async with quotas.new_job(held, engine, app, body.request()):  # an app's: its quotas
        job = await engine.jobs.make(prompt=body.prompt, request=body.request(),
                                     session=session, route="POST /api/jobs",
                                     principal=principal)
    return JSONResponse(job_view(job), status_code=201)


@router.post("/api/jobs/{job_id}/run")
async def run_job(job_id: JobId, engine: EngineDep, app: AppName,
                  session: SessionHeader = None) -> JSONResponse:
    """Fire the job now, as a run of its own chat; its schedule stays as it is."""
    await _for_app(engine, app, session, job_id)
    await engine.jobs.may_change(session, f"a run of job #{job_id}", "POST /api/jobs/run")
    await quotas.run_now(engine, app)  # an app's: 429 past its fires per hour
    fired = await engine.scheduler.run_now(job_id)
    return JSONResponse({"job": job_id, "run_id": fired.run_id,
                         "session_key": fired.session_key}, status_code=202)


@router.patch("/api/jobs/{job_id}")
async def change_job(job_id: JobId, body: JobChange, engine: EngineDep, app: AppName,
                     held: QuotasDep, session: SessionHeader = None) -> dict[str, Any]:
    await _for_app(engine, app, session, job_id)
    async with quotas.changed_job(held, engine, app, job_id, body.enabled):
        return job_view(await engine.jobs.change(job_id, body.enabled, session,
                                                 "PATCH /api/jobs"))


@router.delete("/api/jobs/{job_id}")
async def delete_job(job_id: JobId, engine: EngineDep, app: AppName,
                     session: SessionHeader = None) -> dict[str, Any]:
    await _for_app(engine, app, session, job_id)
    await engine.jobs.delete(job_id, session, "DELETE /api/jobs")
    return {"deleted": job_id}
