"""What one app holds, counted from the tables there are (no table of its own): its jobs (those
made on its behalf, `jobs.principal`, and those a chat it started made: `jobs.made_by`, a chat
whose `sessions.created_by_app` is the app) and when they fired (the audit's `job.fired` rows,
read by time through the audit's index; a fire of a due time admitted again is not counted
twice, and the fires of a job the app deleted since still count). The rules over these counts
are the engine's (`engine/background/app_quotas.py`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, or_, select

from hearth.store.jobs import JobRow, chat_name
from hearth.store.schema import audit, jobs, sessions

FIRED, DELETED = "job.fired", "job.deleted"
OWNER = "owner"  # `made_by` of the owner's jobs: never an app's, whatever chat is so named


def app_of_chat(conn: Connection, key: str) -> str | None:
    """The app that started this chat, None for the owner's (or no chat)."""
    row = conn.execute(select(sessions.c.created_by_app).where(sessions.c.key == key)).first()
    return None if row is None else row[0]


def jobs_of(conn: Connection, app: str, principal: str) -> list[JobRow]:
    """The app's jobs, oldest first: those made on its behalf (`principal`, as stored) and
    those a chat it started made."""
    made_in_its_chat = and_(sessions.c.created_by_app == app, jobs.c.made_by != OWNER)
    rows = conn.execute(select(jobs).outerjoin(sessions, sessions.c.key == jobs.c.made_by)
                        .where(or_(jobs.c.principal == principal, made_in_its_chat))
                        .order_by(jobs.c.id))
    return [JobRow.of(row) for row in rows]


def fires_since(conn: Connection, app: str, principal: str, since: float) -> list[float]:
    """When the app's jobs fired after `since` (scheduled or run now), oldest first."""
    rows = conn.execute(select(audit.c.at, audit.c.action, audit.c.session_key, audit.c.detail)
                        .where(audit.c.at > since, audit.c.action.in_((FIRED, DELETED)))
                        .order_by(audit.c.at)).all()
    chats = {job.session_key for job in jobs_of(conn, app, principal)}
    chats |= _deleted_by(conn, app, [row for row in rows if row.action == DELETED])
    return [float(row.at) for row in rows
            if row.action == FIRED and row.session_key in chats and not _again(row.detail)]


def _deleted_by(conn: Connection, app: str, rows: list[Any]) -> set[str]:
    """The chats of the jobs these `job.deleted` rows say a chat of the app deleted."""
    found: set[str] = set()
    for row in rows:
        job = row.detail.get("job") if isinstance(row.detail, dict) else None
        if isinstance(job, int) and row.session_key is not None \
                and app_of_chat(conn, row.session_key) == app:
            found.add(chat_name(job))
    return found


def _again(detail: object) -> bool:
    """A `job.fired` row of a due time already admitted (nothing new ran)."""
    return isinstance(detail, dict) and detail.get("again") is True
