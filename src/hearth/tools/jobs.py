"""Making a scheduled job: the `schedule_job` tool, and the rules it shares with the jobs API
(one of in_minutes / every_minutes, 1 minute to a year; a prompt of 1 to 8000 characters).

A job outlasts the chat that made it, so it is lasting work: the tool declares
`keeps = "a scheduled job"` and the privacy fence refuses it to a chat that keeps nothing
(Incognito, Temporary, unreadable) before anyone is asked; it refuses again as it runs. Making
a job changes something, so a chat that asks first asks its owner. The audit row a job's
making leaves names the job and its schedule, never the prompt.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from hearth.privacy import reach
from hearth.store import audit
from hearth.store import jobs as job_store
from hearth.store.db import Database, now
from hearth.store.jobs import JobRow
from hearth.tools.base import Effect, Placed, Tool, ToolContext, ToolOutcome, ToolRefused

WHAT = "a scheduled job"  # what lasting_refusal says was not made
MAX_MINUTES = 525_600  # a year
MAX_PROMPT = 8000


class BadSchedule(ValueError):
    """A job request that cannot be scheduled; `sentence` says why."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


def plan(in_minutes: object, every_minutes: object, at: float) -> tuple[float, int | None]:
    """(next_at, every_seconds) for a request: once in `in_minutes`, or every
    `every_minutes` starting one interval from `at`."""
    if (in_minutes is None) == (every_minutes is None):
        raise BadSchedule("Give exactly one of in_minutes (run once) or every_minutes "
                          "(repeat); no job was made.")
    minutes = in_minutes if in_minutes is not None else every_minutes
    if isinstance(minutes, bool) or not isinstance(minutes, int) \
            or not 1 <= minutes <= MAX_MINUTES:
        raise BadSchedule(f"Minutes must be a whole number from 1 to {MAX_MINUTES:,} (a year); "
                          "no job was made.")
    seconds = minutes * 60
    return at + seconds, (seconds if every_minutes is not None else None)


def checked_prompt(prompt: object) -> str:
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT:
        raise BadSchedule(f"The prompt must be 1 to {MAX_PROMPT:,} characters of text; no job "
                          "was made.")
    return prompt.strip()


def schedule(db: Database, *, prompt: object, in_minutes: object, every_minutes: object,
             made_by: str, actor: str, run_id: str | None = None) -> JobRow:
    """Make the job (a promise: synced before it is reported) and audit it."""
    text = checked_prompt(prompt)
    next_at, every_seconds = plan(in_minutes, every_minutes, now())
    with db.write() as conn:
        job = job_store.add(conn, prompt=text, next_at=next_at, every_seconds=every_seconds,
                            made_by=made_by)
        audit.write(conn, "job.created", actor=actor,
                    session_key=None if made_by == "owner" else made_by, run_id=run_id,
                    detail={"job": job.id, "every_seconds": every_seconds,
                            "next_at": next_at})
    return job


def clock(stamp: float, today: float | None = None) -> str:
    """A local time as a person reads it: 14:05 today, 2026-12-02 14:05 on another day."""
    when = datetime.fromtimestamp(stamp)
    if when.date() == datetime.fromtimestamp(now() if today is None else today).date():
        return when.strftime("%H:%M")
    return when.strftime("%Y-%m-%d %H:%M")


def describe(job: JobRow) -> str:
    """The schedule in words: "every 60 min, next at 14:05" or "once, at 14:05"."""
    if job.every_seconds is None:
        return f"once, at {clock(job.next_at)}"
    return f"every {job.every_seconds // 60} min, next at {clock(job.next_at)}"


class ScheduleJob:
    name = "schedule_job"
    description = (
        "Schedule a prompt to run later as its own chat (job-<id>): once, in_minutes from now, "
        "or repeatedly, every every_minutes. Give exactly one of the two. The job's turns run "
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
                schedule, self.db, prompt=args.get("prompt"), in_minutes=args.get("in_minutes"),
                every_minutes=args.get("every_minutes"), made_by=ctx.session_key,
                actor="tool", run_id=ctx.run_id)
        except BadSchedule as bad:
            raise ToolRefused(bad.sentence) from bad
        said = f"Scheduled job #{job.id}: {describe(job)}."
        return ToolOutcome(f"{said} Its turns run in chat {job.session_key}.", said)


JOB_TOOL_NAMES = ("schedule_job",)


def job_tools(db: Database) -> list[Tool]:
    return [ScheduleJob(db)]
