"""Learning's cursor: how far each chat's exchanges have been learned from, and those past it.

A chat's exchange is a run of it that completed, placed by its message's seq; the chat's
`learned_seq` is the seq its exchanges have been learned up to. A pass reads the runs past the
cursor (`runs_since`, oldest first, a batch at most) and, once what they taught is kept, moves
the cursor past the last of them (`advance`: only from where it read, so no exchange is
learned from twice). `waiting` lists the chats with exchanges past their cursor, so a start
learns what a previous process had not.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, exists, select, update

from hearth.store.runs import RunRow
from hearth.store.schema import runs, sessions

_DONE = and_(runs.c.status == "complete", runs.c.ending == "complete")


def cursor(conn: Connection, key: str) -> int | None:
    """The seq chat `key` is learned up to (None: no such chat)."""
    found = conn.execute(select(sessions.c.learned_seq).where(sessions.c.key == key)).first()
    return None if found is None else int(found[0])


def runs_since(conn: Connection, key: str, tab_id: str, after: int, limit: int) -> list[RunRow]:
    """The chat's completed runs whose message is past seq `after`, oldest first."""
    rows = conn.execute(select(runs).where(
        runs.c.session_key == key, runs.c.tab_id == tab_id, _DONE,
        runs.c.user_event_seq > after).order_by(runs.c.user_event_seq).limit(limit))
    return [RunRow.of(row) for row in rows]


def advance(conn: Connection, key: str, read_from: int, to: int) -> bool:
    """Move the chat's cursor to `to`, only if it still stands where the pass read from."""
    return conn.execute(update(sessions).where(
        sessions.c.key == key, sessions.c.learned_seq == read_from)
        .values(learned_seq=to)).rowcount == 1


def waiting(conn: Connection) -> list[tuple[str, str, float]]:
    """The chats with a completed run past their cursor: (key, memory mode, last touched)."""
    past = exists().where(runs.c.session_key == sessions.c.key, runs.c.tab_id == sessions.c.tab_id,
                          _DONE, runs.c.user_event_seq > sessions.c.learned_seq)
    rows = conn.execute(select(sessions.c.key, sessions.c.memory_mode, sessions.c.updated_at)
                        .where(past))
    return [(row.key, row.memory_mode, float(row.updated_at)) for row in rows]
