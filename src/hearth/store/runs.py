"""The runs aggregate: one row per turn, from admission to its ending.

A run's status goes admitted -> running -> complete | error | stopped | abandoned. The
admitted runs of a session, in id order, are that session's durable queue.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update

from hearth.masking import mask
from hearth.store.db import now
from hearth.store.schema import runs, sessions

ACTIVE = ("admitted", "running")
FINAL = ("complete", "error", "stopped", "abandoned")
# the kinds of run a turn resumes after its gateway died (an agent CLI's call is not: its caller
# is gone with the gateway)
RESUMABLE = ("chat", "regenerate", "helper", "job", "recovery", "api")


@dataclass(frozen=True)
class RunRow:
    id: int
    run_id: str
    session_key: str
    tab_id: str
    generation: int
    kind: str
    status: str
    ending: str | None
    sentence: str | None
    recovery_attempts: int
    model: str | None
    user_event_seq: int | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    partial_text: str | None
    ended_seq: int | None
    principal: str  # on whose behalf it runs, as stored (`privacy.principal.decode` reads it)

    @classmethod
    def of(cls, row: Any) -> RunRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})

    @property
    def ended(self) -> bool:
        return self.status in FINAL


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex


_INSERT = runs.insert()
_GET = select(runs).where(runs.c.run_id == bindparam("b_run"))
_STATUS = select(runs.c.status).where(runs.c.run_id == bindparam("b_run"))
_OTHER_ACTIVE = (
    select(runs.c.id)
    .where(runs.c.session_key == bindparam("b_key"), runs.c.status.in_(ACTIVE))
    .limit(1)
)


def insert(
    conn: Connection,
    *,
    run_id: str,
    session_key: str,
    tab_id: str,
    generation: int,
    principal: str,
    kind: str = "chat",
    user_event_seq: int | None = None,
) -> None:
    conn.execute(_INSERT, {
        "run_id": run_id, "session_key": session_key, "tab_id": tab_id,
        "generation": generation, "kind": kind, "status": "admitted",
        "user_event_seq": user_event_seq, "created_at": now(), "principal": principal,
    })


def get(conn: Connection, run_id: str) -> RunRow | None:
    row = conn.execute(_GET, {"b_run": run_id}).first()
    return RunRow.of(row) if row else None


def status_of(conn: Connection, run_id: str) -> str | None:
    """The run's status alone (None: no such run): what a waiter needs to know first."""
    row = conn.execute(_STATUS, {"b_run": run_id}).first()
    return None if row is None else str(row[0])


def any_active(conn: Connection, session_key: str) -> bool:
    """Whether the session has a run admitted or running (so a new one would queue)."""
    return conn.execute(_OTHER_ACTIVE, {"b_key": session_key}).first() is not None


_NEXT = (
    select(runs)
    .where(runs.c.session_key == bindparam("b_key"), runs.c.status == "admitted")
    .order_by(runs.c.id)
    .limit(1)
)
_CURRENT = (
    select(runs)
    .where(runs.c.session_key == bindparam("b_key"), runs.c.status.in_(ACTIVE))
    .order_by(runs.c.status.desc(), runs.c.id)
    .limit(1)
)
_MARK_RUNNING = (
    update(runs)
    .where(runs.c.run_id == bindparam("b_run"), runs.c.status == "admitted")
    .values(status="running", started_at=func.coalesce(runs.c.started_at, bindparam("b_at")),
            replica=bindparam("b_replica"))
)
_CHECKPOINT = (
    update(runs)
    .where(runs.c.run_id == bindparam("b_run"))
    .values(partial_text=bindparam("b_text"), partial_at=bindparam("b_at"))
)
_LAST_SEQ = (
    select(sessions.c.last_seq).where(sessions.c.key == runs.c.session_key).scalar_subquery()
)
_FINISH = (
    update(runs)
    .where(runs.c.run_id == bindparam("b_run"), runs.c.status.in_(ACTIVE))
    .values(status=bindparam("b_status"), ending=bindparam("b_ending"),
            sentence=bindparam("b_sentence"), ended_at=bindparam("b_at"),
            partial_text=None, partial_at=None, ended_seq=_LAST_SEQ)
)
_ENDED_AT = (
    update(runs)
    .where(runs.c.run_id == bindparam("b_run"))
    .values(ended_seq=bindparam("b_seq"))
)
_ENDED_BETWEEN = (
    select(runs)
    .where(runs.c.session_key == bindparam("b_key"), runs.c.tab_id == bindparam("b_tab"),
           runs.c.ended_seq > bindparam("b_after"), runs.c.ended_seq <= bindparam("b_upto"))
    .order_by(runs.c.ended_seq, runs.c.id)
)


def next_admitted(conn: Connection, session_key: str) -> RunRow | None:
    row = conn.execute(_NEXT, {"b_key": session_key}).first()
    return RunRow.of(row) if row else None



def current(conn: Connection, session_key: str) -> RunRow | None:
    """The session's running run, else its oldest admitted one."""
    row = conn.execute(_CURRENT, {"b_key": session_key}).first()
    return RunRow.of(row) if row else None


def mark_running(conn: Connection, run_id: str, replica: str | None = None) -> bool:
    """An admitted run is now running, on the gateway `replica` (store/replicas.py)."""
    return conn.execute(_MARK_RUNNING, {"b_run": run_id, "b_at": now(),
                                        "b_replica": replica}).rowcount == 1


def checkpoint(conn: Connection, run_id: str, text: str | None) -> None:
    """Keep (or clear, with None) the text of the answer streaming now."""
    conn.execute(_CHECKPOINT, {"b_run": run_id, "b_text": text,
                               "b_at": now() if text else None})


def set_user_event_seq(conn: Connection, run_id: str, seq: int) -> None:
    """The run's message is now at `seq` (a message taken into a running turn moved there)."""
    conn.execute(update(runs).where(runs.c.run_id == run_id).values(user_event_seq=seq))


def set_model(conn: Connection, run_id: str, model: str) -> None:
    conn.execute(update(runs).where(runs.c.run_id == run_id).values(model=model))


def finish(conn: Connection, run_id: str, *, status: str, ending: str, sentence: str) -> bool:
    """End an active run. False when it had already ended (an ending is written once).
    The sentence is kept masked: a model's error in it may repeat a key. The run's
    `ended_seq` is its chat's last seq now (see `ended_at_seq` for a notice written after)."""
    if status not in FINAL:
        raise ValueError(f"{status!r} is not a final status")
    result = conn.execute(_FINISH, {"b_run": run_id, "b_status": status, "b_ending": ending,
                                    "b_sentence": mask(sentence), "b_at": now()})
    return result.rowcount == 1


def ended_at_seq(conn: Connection, run_id: str, seq: int) -> None:
    """Say the run ended at `seq` (its ending's notice, appended after `finish`)."""
    conn.execute(_ENDED_AT, {"b_run": run_id, "b_seq": seq})


def ended_between(
    conn: Connection, session_key: str, tab_id: str, after_seq: int, upto_seq: int
) -> list[RunRow]:
    """The runs of this incarnation of the chat that ended at a seq in (after, upto], in the
    order they ended (for replaying their `done` to a reconnecting stream)."""
    rows = conn.execute(_ENDED_BETWEEN, {"b_key": session_key, "b_tab": tab_id,
                                         "b_after": after_seq, "b_upto": upto_seq})
    return [RunRow.of(row) for row in rows]


def with_status(conn: Connection, status: str) -> list[RunRow]:
    rows = conn.execute(select(runs).where(runs.c.status == status).order_by(runs.c.id))
    return [RunRow.of(row) for row in rows]


def sessions_with_admitted(conn: Connection) -> list[str]:
    """Sessions holding admitted runs, the one with the oldest waiting run first."""
    stmt = (
        select(runs.c.session_key, func.min(runs.c.id).label("first"))
        .where(runs.c.status == "admitted")
        .group_by(runs.c.session_key)
        .order_by("first")
    )
    return [row.session_key for row in conn.execute(stmt)]
