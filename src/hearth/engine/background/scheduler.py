"""The scheduler: fires each due job into its own chat, at most once per due time.

It is the gateway's own work, never any chat's: its loop runs in a context of its own, with no
work scope, and the turn a job starts runs as the job's chat (a persistent chat named
`job-<id>`, made the first time it fires and made again if it was deleted). A firing admits
the prompt with the idempotency key `job:<id>:<due second>` as a run of kind "job" (so the
gate refuses what would need the owner's approval), then moves the job on; a crash between the
two fires nothing twice: the next tick finds the job still due, admission answers the run
already made, and the job moves on. Logs and audit rows name jobs, never their prompts.

Missed fires: a job due before this gateway started (it was down), or found more than
`LATE_SECONDS` past due, has missed its time. With `missed = "once"` it fires once now and
moves to its next future time (however many times it missed); with `"skip"` nothing runs and it
moves to its next future time (audited `job.skipped`, reason "missed"; a one-shot is done).
`run_now` fires a job at once, outside its schedule, which it leaves as it is.
All of it runs on the loop, awaiting the store's seam; its ticks wait on the `Clock` it is
given (the system's unless a test hands it a fake one).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock, SystemClock
from hearth.engine.background import app_quotas, job_limits, schedules
from hearth.engine.intake.admission import AdmissionError, Admitted
from hearth.errors import Refusal
from hearth.privacy import principal as principals
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.chats import ChatError
from hearth.store import audit, jobs as job_store
from hearth.store.db import Database
from hearth.store.jobs import JobRow
from hearth.tasks import cancel_and_wait

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0
LATE_SECONDS = 120.0  # due longer ago than this, a job has missed its time
ACTOR = "scheduler"


class JobHost(Protocol):
    """What the scheduler needs of the engine."""

    db: Database

    async def send(self, session_key: str, text: str, *, principal: Principal,
                   kind: str = ..., dispatch: bool = ..., meta: dict[str, Any] | None = ...,
                   idempotency_key: str | None = ...) -> Admitted: ...

    def dispatch(self, session_key: str) -> None: ...


@dataclass(frozen=True)
class Fired:
    job_id: int
    due_at: float
    run_id: str | None  # None: skipped (its chat could not be opened or took no message)
    duplicate: bool = False
    session_key: str = ""  # the job's chat


def idempotency_key(job: JobRow) -> str:
    return f"job:{job.id}:{int(job.next_at)}"


class Scheduler:
    def __init__(self, host: JobHost, tick_seconds: float = TICK_SECONDS,
                 clock: Clock | None = None) -> None:
        self.host = host
        self.tick_seconds = tick_seconds
        self.clock = clock or SystemClock()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.started_at: float | None = None  # what was due before this missed its time

    def start(self) -> None:
        """Start ticking, in an empty context: no chat's work scope reaches the scheduler."""
        if self.started_at is None:
            self.started_at = self.clock.now()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="scheduler",
                                              context=contextvars.Context())

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except SQLAlchemyError as error:  # the store is busy or away: look again next tick
                log.warning("the scheduler could not look for due jobs (%s); trying again",
                            type(error).__name__)
            await self.clock.sleep(self.tick_seconds)

    async def tick(self, at: float | None = None) -> list[Fired]:
        """Fire every job due by `at` (now), one at a time; ticks never overlap."""
        async with self._lock:
            moment = self.clock.now() if at is None else at
            fired: list[Fired] = []
            for job in await self._due(moment):
                if job.missed == "skip" and self._missed(job, moment):
                    fired.append(await self._pass(job, moment))
                    continue
                one = await self._fire(job)
                if one is None:  # the gateway is stopping: what is left fires next time
                    break
                fired.append(one)
            return fired

    async def _due(self, at: float) -> list[JobRow]:
        return await self.host.db.reading(job_store.due, at)

    def _missed(self, job: JobRow, moment: float) -> bool:
        before_start = self.started_at is not None and job.next_at < self.started_at
        return before_start or job.next_at < moment - LATE_SECONDS

    async def _pass(self, job: JobRow, moment: float) -> Fired:
        """A missed time of a job that skips what it missed: move on, run nothing."""
        log.info("job #%d missed its time while the gateway was down; skipped", job.id)
        await self.host.db.writing(_passed, job, moment, durable=False)
        return Fired(job.id, job.next_at, None)

    async def run_now(self, job_id: int) -> Fired:
        """Fire the job now, outside its schedule (which stays as it is): a run of its chat."""
        job = await self.host.db.reading(job_store.get, job_id)
        if job is None:
            raise Refusal("job_not_found", 404, f"There is no job #{job_id}.")
        await self._open(job)
        key = f"job:{job.id}:now:{time.time_ns()}"
        admitted = await self.host.send(job.session_key, job.prompt, kind="job", dispatch=False,
                                        meta={"job": job.id}, idempotency_key=key,
                                        principal=principals.decode(job.principal))
        self.host.dispatch(job.session_key)
        at = self.clock.now()
        await self.host.db.writing(_ran_now, job, admitted, at)
        return Fired(job.id, at, admitted.run_id, session_key=job.session_key)

    async def _fire(self, job: JobRow) -> Fired | None:
        if await app_quotas.fire_refused(self.host, job):  # its app's fires per hour are spent
            return await self._skip(job, app_quotas.FIRES_SPENT)
        if await job_limits.fire_over_limit(self.host, job):  # a spending limit is reached
            return await self._skip(job, job_limits.SPENDING)
        try:
            await self._open(job)
            admitted = await self._admit(job)
        except ChatError as refused:  # its name is held by a chat of another mode
            return await self._skip(job, refused.code)
        except AdmissionError as refused:
            if refused.code == "shutting_down":
                return None
            if refused.code in ("session_deleting", "session_not_found"):
                return Fired(job.id, job.next_at, None)  # its chat is going: again next tick
            return await self._skip(job, refused.code)
        if not admitted.duplicate:
            self.host.dispatch(job.session_key)
        await self.host.db.writing(_advance, job, admitted, self.clock.now(), durable=False)
        return Fired(job.id, job.next_at, admitted.run_id, admitted.duplicate)

    async def _open(self, job: JobRow) -> None:
        """Open (or make again) the job's chat, its maker's (an app's job's chat is the
        app's; a name held by another principal's chat is refused, never opened)."""
        opened = await chats.open_chat(self.host.db, name=job.session_key,
                                       memory_mode="persistent", origin="job",
                                       created_by_app=principals.decode(job.principal).app)
        if opened.created:
            log.info("made chat %s for job #%d", job.session_key, job.id)

    async def _admit(self, job: JobRow) -> Admitted:
        """Admit the prompt, on the loop like every surface's message: admission publishes
        the message on the live bus, which is only ever published to from the loop."""
        return await self.host.send(job.session_key, job.prompt, kind="job", dispatch=False,
                                    meta={"job": job.id}, idempotency_key=idempotency_key(job),
                                    principal=principals.decode(job.principal))

    async def _skip(self, job: JobRow, code: str) -> Fired:
        """Move past a due time the job cannot fire for, saying why in the log and audit."""
        log.warning("job #%d could not fire into chat %s (%s); skipped this time",
                    job.id, job.session_key, code)

        await self.host.db.writing(_skipped, job, code, self.clock.now(), durable=False)
        return Fired(job.id, job.next_at, None)


def _advance(conn: Connection, job: JobRow, admitted: Admitted, at: float) -> None:
    job_store.advance(conn, job.id, at, due_at=job.next_at,
                      upcoming=schedules.upcoming)
    audit.write(conn, "job.fired", actor=ACTOR, session_key=job.session_key,
                run_id=admitted.run_id,
                detail={"job": job.id, "due_at": job.next_at, "again": admitted.duplicate})


def _passed(conn: Connection, job: JobRow, moment: float) -> None:
    job_store.advance(conn, job.id, None, due_at=job.next_at, upcoming=schedules.upcoming,
                      after=moment)
    audit.write(conn, "job.skipped", actor=ACTOR, session_key=job.session_key,
                detail={"job": job.id, "due_at": job.next_at, "reason": "missed"})


def _ran_now(conn: Connection, job: JobRow, admitted: Admitted, at: float) -> None:
    job_store.mark_fired(conn, job.id, at)
    audit.write(conn, "job.fired", actor="owner", session_key=job.session_key,
                run_id=admitted.run_id, detail={"job": job.id, "now": True})


def _skipped(conn: Connection, job: JobRow, code: str, at: float) -> None:
    job_store.advance(conn, job.id, at, due_at=job.next_at,
                      upcoming=schedules.upcoming)
    audit.write(conn, "job.skipped", actor=ACTOR, session_key=job.session_key,
                detail={"job": job.id, "due_at": job.next_at, "reason": code})
