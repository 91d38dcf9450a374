"""The jobs rules: what a job request may be (one of in_minutes / every_minutes, 1 minute to a
year; a cron expression in an IANA time zone; a one-shot time `at`, see
engine/background/schedules.py;
`missed` once or skip; a prompt of 1 to 8000 characters), making one (a promise, audited),
listing them, and pausing, resuming or deleting one, for a chat only when the chat keeps
things. The jobs tool (engine/background/job_tool.py) and the jobs routes (web/api/jobs.py) are thin
adapters over these.

A job outlasts the chat that asks for it, so a chat that keeps nothing (Incognito, Temporary,
or one whose mode cannot be read) may not make, change or delete one: refused with the one
sentence saying so and an audit row `job.refused`. Audit rows name jobs, never their prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import Connection

from hearth.engine.background import schedules
from hearth.engine.background.schedules import BadSchedule
from hearth.errors import Refusal
from hearth.privacy import reach
from hearth.privacy.modes import mode_of
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.naming import namespace
from hearth.store import audit, jobs as job_store
from hearth.store.db import Database, now
from hearth.store.jobs import JobRow

__all__ = ["MAX_MINUTES", "MAX_PROMPT", "WHAT", "BadSchedule", "JobRow", "Plan", "change",
           "delete", "describe", "listing", "make", "may_change", "plan_of", "schedule"]

WHAT = "a scheduled job"  # what lasting_refusal says was not made
MAX_MINUTES = 525_600  # a year
MAX_PROMPT = 8000


@dataclass(frozen=True)
class Plan:
    """A request's schedule, checked: when it is first due and how it repeats."""

    next_at: float
    every_seconds: int | None = None
    cron: str | None = None
    timezone: str | None = None
    missed: str = "once"


def plan_of(request: dict[str, object], at: float) -> Plan:
    """The schedule a request asks for: exactly one of in_minutes, every_minutes, cron (with
    timezone) or at (with timezone); `missed` once (the default) or skip."""
    kinds = [k for k in ("in_minutes", "every_minutes", "cron", "at")
             if request.get(k) is not None]
    if len(kinds) != 1:
        raise BadSchedule("Give exactly one of in_minutes (run once), every_minutes (repeat), "
                          "cron (repeat, with timezone) or at (run once at a time); no job was "
                          "made.")
    missed = request.get("missed") or "once"
    if missed not in schedules.MISSED:
        raise BadSchedule("missed is once (fires missed while the gateway was down are caught "
                          "up with one run) or skip; no job was made.")
    zone = request.get("timezone")
    if kinds[0] == "cron":
        name = schedules.zone_of(zone)
        cron = schedules.check_cron(request["cron"])
        return Plan(schedules.next_cron(cron, name, at), None, cron, name, str(missed))
    if kinds[0] == "at":
        name = schedules.zone_of(zone)
        return Plan(schedules.at_of(request["at"], name, at), timezone=name, missed=str(missed))
    if zone is not None:
        raise BadSchedule("A timezone goes with cron or at; no job was made.")
    next_at, every = plan(request.get("in_minutes"), request.get("every_minutes"), at)
    return Plan(next_at, every, missed=str(missed))


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


def schedule(db: Database, *, prompt: object, request: dict[str, object], made_by: str,
             actor: str, principal: Principal, run_id: str | None = None) -> JobRow:
    """Make the job (a promise: synced before it is reported) and audit it. `request` holds
    the schedule's fields (in_minutes, every_minutes, cron, at, timezone, missed). The job
    fires for `principal` (its maker's, never re-decided), in a chat of that principal's.
    Blocking: the `schedule_job` tool calls it from a thread; the surfaces await `make`."""
    text = checked_prompt(prompt)
    planned = plan_of(request, now())
    with db.write() as conn:
        return _add(conn, text, planned, made_by, actor, principal, run_id)


def _add(conn: Connection, text: str, planned: Plan, made_by: str, actor: str,
         principal: Principal, run_id: str | None) -> JobRow:
    """Write the job and its audit row, in the caller's transaction."""
    job = job_store.add(conn, prompt=text, next_at=planned.next_at,
                        every_seconds=planned.every_seconds, made_by=made_by,
                        cron=planned.cron, timezone=planned.timezone,
                        missed=planned.missed, principal=principal.encode(),
                        chat_prefix=namespace(principal.app))
    audit.write(conn, "job.created", actor=actor,
                session_key=None if made_by == "owner" else made_by, run_id=run_id,
                detail={"job": job.id, "every_seconds": planned.every_seconds,
                        "cron": planned.cron, "timezone": planned.timezone,
                        "next_at": planned.next_at})
    return job


def clock(stamp: float, today: float | None = None, zone: str | None = None) -> str:
    """A time as a person reads it (in `zone`, by default the gateway's): 14:05 today,
    2026-12-02 14:05 on another day."""
    tz = ZoneInfo(zone) if zone else None
    when = datetime.fromtimestamp(stamp, tz)
    if when.date() == datetime.fromtimestamp(now() if today is None else today, tz).date():
        return when.strftime("%H:%M")
    return when.strftime("%Y-%m-%d %H:%M")


def describe(job: JobRow) -> str:
    """The schedule in words: "every 60 min, next at 14:05", "once, at 14:05", "every
    weekday at 09:00 (Europe/Paris), next at 2026-12-03 09:00" (a cron job's and an `at`
    job's times in its own zone)."""
    at = clock(job.next_at, zone=job.timezone)
    if job.once:
        return f"once, at {at}" + (f" ({job.timezone})" if job.timezone else "")
    return f"{schedules.describe(job)}, next at {at}"


def _not_found(job_id: int) -> Refusal:
    return Refusal("job_not_found", 404, f"There is no job #{job_id}.")


async def may_change(db: Database, session: str | None, what: str, route: str) -> str:
    """Who the change is made for ("owner" or the chat's key), refusing a chat whose mode
    keeps nothing (audited, the request's words left out)."""
    if session is None:
        return "owner"
    chat = await db.reading(chats.chat_in, session)
    mode = mode_of(chat.memory_mode)
    refused = reach.lasting_refusal(what, mode)
    if refused is None:
        return chat.key
    await db.writing(audit.write, "job.refused", actor="privacy", session_key=chat.key,
                     detail={"route": route, "mode": mode.value,
                             "reason": "the chat keeps nothing"}, durable=False)
    raise reach.RestrictedSession(refused)


async def listing(db: Database, session: str | None) -> list[JobRow]:
    """Every job (a chat that is not there is refused, not answered)."""
    return await db.reading(_listing, session)


def _listing(conn: Connection, session: str | None) -> list[JobRow]:
    if session is not None:
        chats.chat_in(conn, session)  # 404 for a chat that is not there
    return job_store.list_all(conn)


async def make(db: Database, *, prompt: str, request: dict[str, object], session: str | None,
               route: str, principal: Principal) -> JobRow:
    """A job `principal` (or a chat of theirs that keeps things) asks for, fired on its
    behalf (narrowed to the app in an app's chat); a bad schedule is refused (422 with its
    code: invalid_cron, invalid_timezone, invalid_at or invalid_request)."""
    made_by = await may_change(db, session, WHAT, route)
    if made_by != "owner":
        principal = principal.within((await db.reading(chats.chat_in, made_by)).created_by_app)
    try:
        text, planned = checked_prompt(prompt), plan_of(request, now())
    except BadSchedule as bad:
        raise Refusal(bad.code, 422, bad.sentence) from bad
    job: JobRow = await db.writing(_add, text, planned, made_by, principal.encode(),
                                   principal, None)
    return job


async def delete(db: Database, job_id: int, session: str | None, route: str) -> None:
    by = await may_change(db, session, f"the deletion of job #{job_id}", route)
    await db.writing(_delete, job_id, by)


def _delete(conn: Connection, job_id: int, by: str) -> None:
    if not job_store.delete(conn, job_id):
        raise _not_found(job_id)
    audit.write(conn, "job.deleted", actor="owner",
                session_key=None if by == "owner" else by, detail={"job": job_id})


async def change(db: Database, job_id: int, enabled: bool, session: str | None,
                 route: str) -> JobRow:
    """Pause or resume a job; a run-once job that has run cannot be resumed."""
    by = await may_change(db, session, f"the change to job #{job_id}", route)
    changed: JobRow = await db.writing(_change, job_id, enabled, by)
    return changed


def _change(conn: Connection, job_id: int, enabled: bool, by: str) -> JobRow:
    job = job_store.get(conn, job_id)
    if job is None:
        raise _not_found(job_id)
    if enabled and job.once and job.last_fired_at is not None:
        raise Refusal("job_finished", 409,
                      f"Job #{job_id} ran once and is done; schedule a new one to run it "
                      "again.")
    changed = job_store.set_enabled(conn, job_id, enabled, now(), schedules.upcoming)
    assert changed is not None
    audit.write(conn, "job.changed", actor="owner",
                session_key=None if by == "owner" else by,
                detail={"job": job_id, "enabled": enabled})
    return changed


async def app_scope(db: Database, session: str | None, job_id: int | None = None) -> None:
    """An app's jobs are those a chat of its own made: it names that chat (`session`), and a
    job it names must be one that chat made (else 404, as for a job that is not there).
    Which chats are the app's is checked before this (`web.http.permissions`)."""
    if session is None:
        raise Refusal("app_scope", 403, "An app schedules and reads jobs through a chat of its "
                      "own: name it with the X-Hearth-Session header.")
    if job_id is None:
        return
    job = await db.reading(job_store.get, job_id)
    if job is None or job.made_by != session:
        raise _not_found(job_id)


def made_in(found: list[JobRow], session: str | None) -> list[JobRow]:
    """The jobs `session` made (all of them when None: the owner's view)."""
    return found if session is None else [job for job in found if job.made_by == session]
