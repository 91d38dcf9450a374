"""The owed-chores aggregate: background chores no model could do, waiting to be tried again.

A row names the chore (`kind`), the chat and the turn it is for, how many tries it has had
and when it may be tried next. One chore is owed once: owing it again only moves its next
try. A try claims the row first (`claim`: the try is counted and the next one scheduled in
the same write), so a crash mid-try neither loses it nor tries it in a tight loop; a try that
found every model resting is put back uncounted (`put_back`). `soonest` says when the next
one falls due, so the retry loop sleeps until then rather than look every few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from hearth.store.db import now
from hearth.store.schema import owed_chores


@dataclass(frozen=True)
class OwedRow:
    id: int
    kind: str
    session_key: str
    run_id: str | None
    attempts: int
    next_at: float
    created_at: float
    reason: str | None = None  # why no model could do it at its last try

    @classmethod
    def of(cls, row: Any) -> OwedRow:
        return cls(id=row.id, kind=row.kind, session_key=row.session_key, run_id=row.run_id,
                   attempts=row.attempts, next_at=row.next_at, created_at=row.created_at,
                   reason=row.reason)


def owe(conn: Connection, kind: str, session_key: str, run_id: str | None, *,
        attempts: int, next_at: float, reason: str | None = None) -> OwedRow:
    """Owe this chore (tried `attempts` times so far) from `next_at`, `reason` saying why;
    one owed already is kept, with its tries, next try and reason updated."""
    kept = _find(conn, kind, session_key, run_id)
    if kept is not None:
        conn.execute(update(owed_chores).where(owed_chores.c.id == kept.id)
                     .values(attempts=max(kept.attempts, attempts), next_at=next_at,
                             reason=reason))
        found = get(conn, kept.id)
        assert found is not None
        return found
    made = conn.execute(owed_chores.insert().values(
        kind=kind, session_key=session_key, run_id=run_id, attempts=attempts, next_at=next_at,
        created_at=now(), reason=reason))
    key = made.inserted_primary_key
    assert key is not None
    row = get(conn, int(key[0]))
    assert row is not None
    return row


def get(conn: Connection, owed_id: int) -> OwedRow | None:
    row = conn.execute(select(owed_chores).where(owed_chores.c.id == owed_id)).first()
    return OwedRow.of(row) if row is not None else None


def _find(conn: Connection, kind: str, session_key: str, run_id: str | None) -> OwedRow | None:
    query = select(owed_chores).where(owed_chores.c.kind == kind,
                                      owed_chores.c.session_key == session_key)
    query = query.where(owed_chores.c.run_id.is_(None) if run_id is None
                        else owed_chores.c.run_id == run_id)
    row = conn.execute(query.order_by(owed_chores.c.id)).first()
    return OwedRow.of(row) if row is not None else None


def owed_for(conn: Connection, session_key: str, kind: str | None = None) -> list[OwedRow]:
    """The chat's owed chores (of one kind, when given), oldest first."""
    query = select(owed_chores).where(owed_chores.c.session_key == session_key)
    if kind is not None:
        query = query.where(owed_chores.c.kind == kind)
    return [OwedRow.of(r) for r in conn.execute(query.order_by(owed_chores.c.id))]


def is_owed(conn: Connection, session_key: str, kind: str) -> bool:
    """Is a chore of this kind owed to the chat?"""
    return conn.execute(select(owed_chores.c.id).where(
        owed_chores.c.session_key == session_key, owed_chores.c.kind == kind)).first() is not None


def due(conn: Connection, at: float, limit: int, kinds: tuple[str, ...]) -> list[OwedRow]:
    """The owed chores of these kinds whose next try has come, soonest first."""
    rows = conn.execute(select(owed_chores)
                        .where(owed_chores.c.next_at <= at, owed_chores.c.kind.in_(kinds))
                        .order_by(owed_chores.c.next_at, owed_chores.c.id).limit(limit))
    return [OwedRow.of(r) for r in rows]


def soonest(conn: Connection, kinds: tuple[str, ...]) -> float | None:
    """When the first owed chore of these kinds falls due (None: none is owed)."""
    at = conn.execute(select(func.min(owed_chores.c.next_at))
                      .where(owed_chores.c.kind.in_(kinds))).scalar()
    return None if at is None else float(at)


def put_back(conn: Connection, owed_id: int, *, attempts: int, next_at: float,
             reason: str | None) -> bool:
    """Set the chore's tries, next try and why it is still owed, as given (a try that never
    reached a model is not counted); False when it is no longer owed."""
    return conn.execute(update(owed_chores).where(owed_chores.c.id == owed_id)
                        .values(attempts=max(0, attempts), next_at=next_at,
                                reason=reason)).rowcount == 1


def claim(conn: Connection, owed_id: int, next_at: float) -> OwedRow | None:
    """Count a try of this chore and schedule the one after it; None when it is no longer
    owed (done, or its chat deleted)."""
    claimed = conn.execute(update(owed_chores).where(owed_chores.c.id == owed_id)
                           .values(attempts=owed_chores.c.attempts + 1, next_at=next_at))
    return get(conn, owed_id) if claimed.rowcount == 1 else None


def settle(conn: Connection, owed_id: int) -> bool:
    """The chore is done (or given up): it is owed no more."""
    return conn.execute(delete(owed_chores).where(owed_chores.c.id == owed_id)).rowcount == 1


def drop_chat(conn: Connection, session_key: str) -> int:
    """Drop every chore owed to this chat (it is being deleted); how many."""
    return conn.execute(
        delete(owed_chores).where(owed_chores.c.session_key == session_key)).rowcount


def drop_kind(conn: Connection, session_key: str, kind: str) -> int:
    """Drop the chore of `kind` owed to this chat (what it was for changed); how many."""
    return conn.execute(delete(owed_chores).where(
        owed_chores.c.session_key == session_key, owed_chores.c.kind == kind)).rowcount


# -- the delivery desk (engine.delivery.desk): the owed chores as the owner sees them -------

def listing(conn: Connection, limit: int) -> list[OwedRow]:
    """Every owed chore, the most tried first (then the oldest)."""
    rows = conn.execute(select(owed_chores).order_by(
        owed_chores.c.attempts.desc(), owed_chores.c.id).limit(limit))
    return [OwedRow.of(r) for r in rows]


def count_tried(conn: Connection, attempts: int) -> int:
    """How many owed chores have been tried at least `attempts` times."""
    return int(conn.execute(select(func.count()).select_from(owed_chores).where(
        owed_chores.c.attempts >= attempts)).scalar_one())


def due_now(conn: Connection, owed_id: int, at: float) -> bool:
    """Make the chore due at `at`, unless it is due by then already; whether it was moved."""
    return conn.execute(update(owed_chores).where(
        owed_chores.c.id == owed_id, owed_chores.c.next_at > at)
        .values(next_at=at)).rowcount == 1
