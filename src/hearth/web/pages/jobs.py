"""The dashboard's Jobs page: every scheduled job with the first line of its prompt, its
schedule in words, its next fire time (in the job's own zone for a cron or `at` job, else the
gateway's; said with the zone), when it last fired and whether it is on; Pause or Resume, Run
now and Delete buttons (form posts that come back to this page), and a form that adds a job.

The page owns `GET /jobs` and `POST /jobs/add`, `/jobs/{id}/pause`, `/jobs/{id}/resume`,
`/jobs/{id}/run`, `/jobs/{id}/delete`. What is refused (a bad schedule, a job that is gone, a
one-shot that ran) comes back as this page with the sentence and the refusal's status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from hearth.engine.background import jobs, schedules
from hearth.engine.background.jobs import JobRow, clock
from hearth.errors import Refusal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import principal_of
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])

MAX_ID = 2**62
_DIGITS = re.compile(r"[0-9]{1,19}")
KINDS = {"every": "Every N minutes", "in": "Once, in N minutes", "cron": "Cron expression",
         "at": "Once, at a time"}
DONE = {
    "added": "Scheduled. The job's turns run in its own chat.",
    "paused": "Paused. It does not fire until resumed.",
    "resumed": "Resumed, from its next time.",
    "ran": "Running now, in the job's chat.",
    "deleted": "Deleted. Its chat stays.",
}
ACTIONS = ("pause", "resume", "run", "delete")


@dataclass(frozen=True)
class JobLine:
    """One job as the page shows it."""

    id: int
    title: str
    schedule: str
    next_at: str | None
    zone: str
    last_fired: str | None
    state: str
    enabled: bool
    session_key: str


def line_of(job: JobRow, gateway_zone: str) -> JobLine:
    zone = job.timezone or gateway_zone
    first = job.prompt.strip().splitlines()[0]
    state = "On" if job.enabled else ("Done" if job.once and job.last_fired_at else "Paused")
    return JobLine(job.id, first, schedules.describe(job),
                   clock(job.next_at, zone=zone) if job.enabled else None, zone,
                   clock(job.last_fired_at, zone=zone) if job.last_fired_at else None,
                   state, job.enabled, job.session_key)


async def _jobs_page(request: Request, engine: EngineDep, *, status: int = 200,
                     problem: str | None = None, done: str | None = None,
                     adding: dict[str, str] | None = None) -> Response:
    found = await engine.jobs.listing(None)
    zone = schedules.local_zone_name()
    return await page(request, engine, "jobs.html", status=status, problem=problem,
                      done=DONE.get(done or ""), jobs=[line_of(j, zone) for j in found],
                      kinds=KINDS, adding=adding or {}, gateway_zone=zone,
                      max_prompt=jobs.MAX_PROMPT)


@pages.get("/jobs")
async def jobs_page(request: Request, engine: EngineDep, done: str | None = None) -> Response:
    return await _jobs_page(request, engine, done=done)


def request_of(form: dict[str, str]) -> dict[str, object]:
    """The schedule a form asks for (what the API takes), refused when its kind is none."""
    kind, value = form.get("kind", ""), form.get("value", "").strip()
    if kind not in KINDS:
        raise Refusal("invalid_request", 422, "Choose how the job is scheduled.")
    asked: dict[str, Any] = {"missed": form.get("missed") or "once"}
    if kind in ("cron", "at"):
        asked[kind] = value
        asked["timezone"] = form.get("timezone", "").strip() or None
    elif not value.isdigit():
        raise Refusal("invalid_request", 422, "Minutes must be a whole number from 1 to "
                                              f"{jobs.MAX_MINUTES:,} (a year).")
    else:
        asked["every_minutes" if kind == "every" else "in_minutes"] = int(value)
    return asked


@pages.post("/jobs/add")
async def add_job(request: Request, engine: EngineDep) -> Response:
    form = await form_of(request)
    try:
        await engine.jobs.make(prompt=form.get("prompt", ""), request=request_of(form),
                               session=None, route="POST /jobs/add",
                               principal=principal_of(request))
    except Refusal as refused:
        return await _jobs_page(request, engine, status=refused.status,
                                problem=refused.sentence, adding=form)
    return RedirectResponse("/jobs?done=added", status_code=303)


@pages.post("/jobs/{job_id}/{action}")
async def act(request: Request, engine: EngineDep, job_id: str, action: str) -> Response:
    """Pause, resume, run now or delete a job, then back to this page."""
    await form_of(request)
    try:
        if action not in ACTIONS:
            raise Refusal("not_found", 404, "There is no such thing to do to a job.")
        number = int(job_id) if _DIGITS.fullmatch(job_id) else 0
        if not 1 <= number <= MAX_ID:
            raise Refusal("job_not_found", 404, f"There is no job #{job_id[:40]}.")
        await _do(engine, action, number)
    except Refusal as refused:
        return await _jobs_page(request, engine, status=refused.status,
                                problem=refused.sentence)
    said = {"pause": "paused", "resume": "resumed", "run": "ran", "delete": "deleted"}[action]
    return RedirectResponse(f"/jobs?done={said}", status_code=303)


async def _do(engine: EngineDep, action: str, job_id: int) -> None:
    route = f"POST /jobs/{action}"
    if action == "run":
        await engine.scheduler.run_now(job_id)
    elif action == "delete":
        await engine.jobs.delete(job_id, None, route)
    else:
        await engine.jobs.change(job_id, action == "resume", None, route)
