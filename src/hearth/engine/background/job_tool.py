"""The `schedule_job` tool: a thin adapter over the jobs rules (engine/background/jobs.py).

A job outlasts the chat that made it, so it is lasting work: the tool declares
`keeps = "a scheduled job"` and the privacy fence refuses it to a chat that keeps nothing
(Incognito, Temporary, unreadable) before anyone is asked; it refuses again as it runs. Making
a job changes something, so a chat that asks first asks its owner.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hearth.engine.background.jobs import MAX_MINUTES, WHAT, BadSchedule, describe, schedule
from hearth.privacy import principal as principals, reach, scope as work_scope
from hearth.privacy.principal import Principal
from hearth.store.db import Database
from hearth.tools.base import Effect, Placed, Tool, ToolContext, ToolOutcome, ToolRefused


class ScheduleJob:
    name = "schedule_job"
    description = (
        "Schedule a prompt to run later as its own chat (job-<id>): once, in_minutes from now "
        "or at a time; or repeatedly, every every_minutes or on a cron expression in a time "
        "zone. Give exactly one of in_minutes, every_minutes, cron, at. The job's turns run "
        "unattended: what needs the owner's approval is refused there."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "What the job asks, each time it runs"},
            "in_minutes": {"type": "integer", "minimum": 1, "maximum": MAX_MINUTES,
                           "description": "Run once, this many minutes from now"},
            "every_minutes": {"type": "integer", "minimum": 1, "maximum": MAX_MINUTES,
                              "description": "Run every this many minutes"},
            "cron": {"type": "string", "description": "Run at each time of this five-field "
                     "cron expression (minute hour day-of-month month day-of-week), e.g. "
                     "'0 9 * * 1-5' for weekdays at 09:00"},
            "at": {"type": "string", "description": "Run once at this time: an ISO 8601 local "
                   "date-time (2026-12-24T09:00), or 'in 20 minutes', 'tomorrow 9:00', "
                   "'at 17:30'"},
            "timezone": {"type": "string", "description": "IANA time zone for cron or at "
                         "(e.g. Europe/Paris); the gateway's own when left out"},
            "missed": {"type": "string", "enum": ["once", "skip"], "description": "Fires "
                       "missed while the gateway was down: once (one catch-up run, the "
                       "default) or skip"},
        },
        "required": ["prompt"],
    }
    effect: Effect = "changes"
    placed: Placed = "gateway"
    parallel_safe = False
    keeps = WHAT

    def __init__(self, db: Database) -> None:
        self.db = db

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        refused = reach.lasting_refusal(WHAT)
        if refused is not None:
            raise ToolRefused(refused)
        try:
            job = await asyncio.to_thread(
                schedule, self.db, prompt=args.get("prompt"), request=args,
                made_by=ctx.session_key, actor="tool", run_id=ctx.run_id,
                principal=_asking())
        except BadSchedule as bad:
            raise ToolRefused(bad.sentence) from bad
        said = f"Scheduled job #{job.id}: {describe(job)}."
        return ToolOutcome(f"{said} Its turns run in chat {job.session_key}.", said)


def _asking() -> Principal:
    """The turn's principal, from its work scope (a job fires for whoever made it); work of
    no known principal is a guest of nowhere, never the owner."""
    scope = work_scope.current()
    found = scope.principal if scope is not None else None
    return found if found is not None else principals.UNKNOWN


JOB_TOOL_NAMES = ("schedule_job",)


def job_tools(db: Database) -> list[Tool]:
    return [ScheduleJob(db)]
