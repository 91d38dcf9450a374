"""The store's side of a chat's export and import (`engine.operations.jsonl`,
`engine.operations.importing`): a chat read whole, its variant tree included (every event, on the
head's path or not, with all its columns), and an imported chat's events and runs written in its own
transaction.

Reading is by snapshot: `snapshot` reads the chat's row (its head) and how many events it had
then, and the pages that follow read only events up to that seq, so a turn appending while the
chat is exported never leaves the file with a head it does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select, update

from hearth.store.runs import RunRow
from hearth.store.schema import runs, sessions, transcript_events

_T = transcript_events


@dataclass(frozen=True)
class ChatSnapshot:
    """A chat as an export reads it: its row's fields and the events it holds up to `last_seq`."""

    key: str
    title: str | None
    memory_mode: str
    agent: str
    model: str | None
    folder: str | None
    tags: tuple[str, ...]
    pinned: bool
    archived: bool
    created_at: float
    updated_at: float
    head_event_id: str | None
    last_seq: int
    events: int


@dataclass(frozen=True)
class KeptEvent:
    """One transcript event with every column an export carries."""

    seq: int
    event_id: str
    parent_event_id: str | None
    kind: str
    content: dict[str, Any]
    meta: dict[str, Any]
    run_id: str | None
    source_channel: str | None
    source_thread: str | None
    source_user: str | None
    off_path: bool
    created_at: float


_EVENT = select(*(_T.c[name] for name in KeptEvent.__dataclass_fields__))


def kept_keys(conn: Connection) -> list[str]:
    """Every persistent chat's key, oldest first (archived ones too): what "export all" reads.
    A restricted chat is never among them."""
    rows = conn.execute(select(sessions.c.key).where(sessions.c.memory_mode == "persistent")
                        .order_by(sessions.c.created_at, sessions.c.key))
    return [key for (key,) in rows]


def snapshot(conn: Connection, key: str) -> ChatSnapshot | None:
    """The chat called `key` and how many events it holds now (None: no such chat)."""
    row = conn.execute(select(sessions).where(sessions.c.key == key)).first()
    if row is None:
        return None
    m = row._mapping
    count = conn.execute(select(func.count()).where(
        _T.c.session_key == key, _T.c.seq <= m["last_seq"])).scalar_one()
    return ChatSnapshot(
        key=m["key"], title=m["title"], memory_mode=m["memory_mode"], agent=m["agent"],
        model=m["model"], folder=m["folder"], tags=tuple(m["tags"] or ()),
        pinned=bool(m["pinned"]), archived=bool(m["archived"]), created_at=m["created_at"],
        updated_at=m["updated_at"], head_event_id=m["head_event_id"], last_seq=m["last_seq"],
        events=int(count))


def events_page(conn: Connection, key: str, after_seq: int, upto_seq: int, limit: int
                ) -> list[KeptEvent]:
    """Up to `limit` events with after_seq < seq <= upto_seq, on the path or not, by seq."""
    rows = conn.execute(_EVENT.where(_T.c.session_key == key, _T.c.seq > after_seq,
                                     _T.c.seq <= upto_seq).order_by(_T.c.seq).limit(limit))
    return [KeptEvent(*row) for row in rows]


def runs_named(conn: Connection, key: str, run_ids: list[str]) -> list[RunRow]:
    """The chat's runs among `run_ids`, oldest first."""
    if not run_ids:
        return []
    rows = conn.execute(select(runs).where(runs.c.session_key == key,
                                           runs.c.run_id.in_(run_ids)).order_by(runs.c.id))
    return [RunRow.of(row) for row in rows]


def insert_runs(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Runs that have ended (an imported chat's), each a dict of `runs` columns."""
    if rows:
        conn.execute(runs.insert(), rows)


def insert_events(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Events written as they are (an imported chat's: their seq, ids, parents and `off_path`
    already decided), each a dict of `transcript_events` columns."""
    if rows:
        conn.execute(_T.insert(), rows)


def set_imported(conn: Connection, key: str, **values: Any) -> None:
    """An imported chat's row: its filing, times, head, last seq and message count. Its
    exchanges were not had here: learning starts after them."""
    if "last_seq" in values:
        values["learned_seq"] = values["last_seq"]
    conn.execute(update(sessions).where(sessions.c.key == key).values(**values))
