"""The jobs aggregate: scheduled prompts, when each is next due, and what fired last.

A job fires its prompt into its own chat (`job-<id>`) at `next_at`, then every
`every_seconds` or at the next time of its `cron` expression in its `timezone` (computed by the
engine, `engine/background/schedules.py`, and handed in as `upcoming`); a one-shot (neither) is
disabled once it fired. `missed` says what fires missed while the gateway was down come to.
`advance` moves a job past the due time it fired for, and only that one: a second advance for the
same due time changes nothing, so two ticks that both saw the job due cannot skip an occurrence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete as sql_delete, select, update

from hearth.store.db import now
from hearth.store.schema import jobs

CHAT_PREFIX = "job-"


@dataclass(frozen=True)
class JobRow:
    id: int
    prompt: str
    every_seconds: int | None
    next_at: float
    enabled: bool
    session_key: str
    made_by: str
    created_at: float
    last_fired_at: float | None
    cron: str | None = None
    timezone: str | None = None
    missed: str = "once"
    principal: str = "owner"  # on whose behalf it fires, as stored (never re-decided)

    @property
    def once(self) -> bool:
        return self.every_seconds is None and self.cron is None

    @classmethod
    def of(cls, row: Any) -> JobRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


Upcoming = Callable[[JobRow, float], float | None]  # a job's first fire time after a moment


def chat_name(job_id: int) -> str:
    """The name of the job's own chat."""
    return f"{CHAT_PREFIX}{job_id}"


def add(conn: Connection, *, prompt: str, next_at: float, every_seconds: int | None,
        made_by: str, principal: str, cron: str | None = None,
        timezone: str | None = None, missed: str = "once", chat_prefix: str = "") -> JobRow:
    """A new enabled job, its chat named after its id (the id is known once the row is in),
    after `chat_prefix` (an app's namespace: the engine's `naming.key_for`)."""
    inserted = conn.execute(jobs.insert().values(
        prompt=prompt, every_seconds=every_seconds, next_at=next_at, enabled=True,
        session_key="", made_by=made_by, created_at=now(), cron=cron, timezone=timezone,
        missed=missed, principal=principal,
    )).inserted_primary_key
    assert inserted is not None
    job_id = int(inserted[0])
    conn.execute(update(jobs).where(jobs.c.id == job_id)
                 .values(session_key=chat_prefix + chat_name(job_id)))
    made = get(conn, job_id)
    assert made is not None
    return made


def get(conn: Connection, job_id: int) -> JobRow | None:
    row = conn.execute(select(jobs).where(jobs.c.id == job_id)).first()
    return JobRow.of(row) if row else None


def list_all(conn: Connection, limit: int = 500) -> list[JobRow]:
    """Every job, oldest first."""
    rows = conn.execute(select(jobs).order_by(jobs.c.id).limit(limit))
    return [JobRow.of(row) for row in rows]


def delete(conn: Connection, job_id: int) -> bool:
    """Remove the job (its chat stays: the transcript is the owner's record)."""
    return conn.execute(sql_delete(jobs).where(jobs.c.id == job_id)).rowcount == 1


def due(conn: Connection, at: float, limit: int = 100) -> list[JobRow]:
    """Enabled jobs whose time has come by `at`, the longest-waiting first."""
    rows = conn.execute(select(jobs)
                        .where(jobs.c.enabled.is_(True), jobs.c.next_at <= at)
                        .order_by(jobs.c.next_at, jobs.c.id).limit(limit))
    return [JobRow.of(row) for row in rows]


def next_due_at(conn: Connection) -> float | None:
    """When the soonest enabled job is due, or None when none is."""
    row = conn.execute(select(jobs.c.next_at).where(jobs.c.enabled.is_(True))
                       .order_by(jobs.c.next_at).limit(1)).first()
    return float(row[0]) if row else None


def following(due_at: float, every_seconds: int, after: float) -> float:
    """The first occurrence of the schedule (`due_at` + k·every) later than `after`: a job
    that missed several occurrences (the gateway was down) fires once, not once for each."""
    if due_at > after:
        return due_at
    skipped = math.floor((after - due_at) / every_seconds) + 1
    return due_at + skipped * every_seconds


def _next(job: JobRow, after: float, upcoming: Upcoming | None) -> float | None:
    if upcoming is not None:
        return upcoming(job, after)
    if job.every_seconds is None:
        return None
    return following(job.next_at, job.every_seconds, after)


def advance(conn: Connection, job_id: int, fired_at: float | None,
            due_at: float | None = None, upcoming: Upcoming | None = None,
            after: float | None = None) -> JobRow | None:
    """Record that the job fired at `fired_at` (None: it was skipped, nothing ran) for the
    due time `due_at` (by default its current one) and move it on: a repeating job to its
    first occurrence after `after` (by default `fired_at`), a one-shot to disabled. None (and
    nothing changed) when the job is gone, paused, or already moved on."""
    job = get(conn, job_id)
    if job is None or not job.enabled or (due_at is not None and job.next_at != due_at):
        return None
    values: dict[str, Any] = {} if fired_at is None else {"last_fired_at": fired_at}
    moment = after if after is not None else (fired_at if fired_at is not None else now())
    upcoming_at = _next(job, moment, upcoming)
    if upcoming_at is None:
        values["enabled"] = False
    else:
        values["next_at"] = upcoming_at
    moved = conn.execute(update(jobs)
                         .where(jobs.c.id == job_id, jobs.c.next_at == job.next_at,
                                jobs.c.enabled.is_(True))
                         .values(**values))
    return get(conn, job_id) if moved.rowcount == 1 else None


def mark_fired(conn: Connection, job_id: int, fired_at: float) -> None:
    """Record a firing outside the schedule (run now): the schedule stays as it is."""
    conn.execute(update(jobs).where(jobs.c.id == job_id).values(last_fired_at=fired_at))


def set_enabled(conn: Connection, job_id: int, enabled: bool, at: float,
                upcoming: Upcoming | None = None) -> JobRow | None:
    """Pause or resume a job; a repeating job resumed after its time skips what it missed."""
    job = get(conn, job_id)
    if job is None:
        return None
    values: dict[str, Any] = {"enabled": enabled}
    if enabled and not job.once and job.next_at <= at:
        values["next_at"] = _next(job, at, upcoming)
    conn.execute(update(jobs).where(jobs.c.id == job_id).values(**values))
    return get(conn, job_id)
