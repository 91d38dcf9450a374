"""Replicas and leases: the gateways serving this database, and what each of them holds.

Several gateways (replicas) may serve one PostgreSQL database. Each has a row in `replicas`,
made when it starts (`join`) and renewed every third of its lease (`beat`); a replica whose
row was not renewed for a whole lease is dead. Every run a replica runs names it
(`runs.replica`, set where the run is marked running), so the runs a dead replica left are
taken back by the first live replica to look (`take_back`), each once: the statement that
counts the recovery attempt also names the taker, and PostgreSQL re-checks a row a concurrent
transaction changed before it updates it, so a second taker finds the run no longer a dead
replica's. A named lease (`hold`: the leader's) is held by one live replica at a time.

Times here are the database's clock (`clock`), one clock for every replica whatever their
hosts' clocks say. On SQLite, one gateway per database, the same statements run with only
the gateway's own row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    and_,
    case,
    cast as sql_cast,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from hearth.store.runs import RESUMABLE
from hearth.store.schema import leases, replicas, runs, sessions, tool_calls


def clock(conn: Connection) -> ColumnElement[float]:
    """Now, in UNIX seconds, by the database's clock (as a SQL expression)."""
    if conn.dialect.name == "postgresql":
        return sql_cast(func.extract("epoch", func.clock_timestamp()), Float)
    return sql_cast(text("(julianday('now') - 2440587.5) * 86400.0"), Float)


def join(conn: Connection, replica: str, place: str, pid: int) -> None:
    """Make this gateway's row (`place`: its host and home)."""
    now = clock(conn)
    conn.execute(replicas.insert().values(id=replica, place=place, pid=pid, started_at=now,
                                          beat_at=now))


def beat(conn: Connection, replica: str) -> bool:
    """Renew this gateway's row. False when it is gone: another replica found it dead and
    took its runs back, so this one must do nothing more."""
    return conn.execute(update(replicas).where(replicas.c.id == replica)
                        .values(beat_at=clock(conn))).rowcount == 1


def leave(conn: Connection, replica: str) -> None:
    """A clean stop: the row goes, and any lease it held with it."""
    conn.execute(delete(leases).where(leases.c.holder == replica))
    conn.execute(delete(replicas).where(replicas.c.id == replica))


def forget_place(conn: Connection, place: str, keep: str) -> list[str]:
    """The rows of earlier gateways at `place` (this host and home: a gateway that ended
    there, however it ended) are dead whatever their beat says: removed, their ids answered
    so their runs can be taken back at once. `keep`: this gateway's own row."""
    gone = [str(row[0]) for row in conn.execute(
        select(replicas.c.id).where(replicas.c.place == place, replicas.c.id != keep))]
    if gone:
        conn.execute(delete(replicas).where(replicas.c.id.in_(gone)))
    return gone


def forget_others(conn: Connection, keep: str) -> None:
    """SQLite (one gateway per database): every other row is a gateway that ended."""
    conn.execute(delete(replicas).where(replicas.c.id != keep))


def live(conn: Connection, lease: float) -> list[str]:
    """The replicas whose lease stands."""
    return [str(row[0]) for row in conn.execute(
        select(replicas.c.id).where(replicas.c.beat_at >= clock(conn) - lease)
        .order_by(replicas.c.started_at))]


@dataclass(frozen=True)
class Taken:
    """Runs taken back from replicas that died: requeued (their chats' queues take them
    again), past the recovery budget (the taker ends them abandoned), or of a kind no turn
    resumes (the taker ends them interrupted). Each is named the taker's until it ends."""

    requeued: list[tuple[str, str]]  # (run_id, chat)
    past_budget: list[tuple[str, str, int]]  # (run_id, chat, attempts)
    gone: list[tuple[str, str]]  # (run_id, chat): an agent CLI's call


def take_back(conn: Connection, me: str, lease: float, budget: int) -> Taken:
    """Take every run left running by a replica that is not live (dead, gone, or never
    named): one more recovery attempt counted on each that the stop interrupted (not on one
    that only waited for the owner: `_only_waiting`), and each requeued within `budget`;
    the chats' writer claims they held released. Dead replicas' rows are removed."""
    alive = select(replicas.c.id).where(replicas.c.beat_at >= clock(conn) - lease)
    orphaned = or_(runs.c.replica.is_(None), runs.c.replica.not_in(alive))
    counted = case((_only_waiting(), 0), else_=1)
    taken = conn.execute(
        update(runs).where(runs.c.status == "running", orphaned)
        .values(recovery_attempts=runs.c.recovery_attempts + counted, replica=literal(me))
        .returning(runs.c.run_id, runs.c.session_key, runs.c.kind,
                   runs.c.recovery_attempts)).all()
    if taken:
        conn.execute(update(sessions).where(sessions.c.writer_run_id.in_(
            [row.run_id for row in taken])).values(writer_run_id=None))
    back = [row for row in taken if row.kind in RESUMABLE and row.recovery_attempts <= budget]
    if back:
        conn.execute(update(runs).where(runs.c.run_id.in_([row.run_id for row in back]))
                     .values(status="admitted", replica=None))
    conn.execute(delete(replicas).where(replicas.c.beat_at < clock(conn) - lease))
    return Taken(
        requeued=[(row.run_id, row.session_key) for row in back],
        past_budget=[(row.run_id, row.session_key, row.recovery_attempts) for row in taken
                     if row.kind in RESUMABLE and row.recovery_attempts > budget],
        gone=[(row.run_id, row.session_key) for row in taken if row.kind not in RESUMABLE])


def _only_waiting() -> ColumnElement[bool]:
    """A run whose calls wait for the owner's answer and none of which had begun: nothing
    of it was running, so a restart interrupted nothing (its approvals wait again)."""
    def calls(status: str) -> ColumnElement[bool]:
        return exists().where(tool_calls.c.run_id == runs.c.run_id,
                              tool_calls.c.status == status)
    return and_(calls("requested"), ~calls("started"))


def hold(conn: Connection, name: str, me: str, lease: float) -> bool:
    """Take or renew the lease `name` for `lease` seconds: True when this replica holds it
    now (nobody held it, its holder's time ran out, or it was already this replica's)."""
    until = clock(conn) + lease
    renewed = conn.execute(
        update(leases).where(leases.c.name == name,
                             or_(leases.c.holder == me, leases.c.until_at < clock(conn)))
        .values(holder=me, until_at=until)).rowcount
    if renewed:
        return True
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    made = conn.execute(insert(leases).values(name=name, holder=me, until_at=until)
                        .on_conflict_do_nothing(index_elements=["name"])
                        .returning(leases.c.name)).first()  # rowcount: -1 on a conflict
    return made is not None


def holder(conn: Connection, name: str) -> str | None:
    """Who holds the lease `name` now (None: nobody, or its time ran out)."""
    row = conn.execute(select(leases.c.holder).where(
        and_(leases.c.name == name, leases.c.until_at >= clock(conn)))).first()
    return str(row[0]) if row else None
