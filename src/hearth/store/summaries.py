"""The context-summaries aggregate: a chat's compacted view for its model (derived records).

A record says: for the model, the chat's events (head_through, through_seq] are read as
`summary` (plus `asks`, the owner's requests in their words). The transcript is never
changed. A record applies only while the events it summarized are the ones it was made from:
`fingerprint` hashes the count and row ids of those on the head's path, so a deleted event or
a head moved past one (a rewind, an edit, a variant chosen) makes it stale and the model reads
the events again. A fingerprint is one SQL aggregate over a range of the primary key, so
checking one each turn stays cheap as a chat grows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, literal_column, select
from sqlalchemy.sql.elements import ColumnElement

from hearth.store.db import now
from hearth.store.schema import context_summaries, sessions, transcript_events
from hearth.store.transcript import ON_PATH, EventRow

KINDS = ("compaction", "idle")
KEEP_PER_CHAT = 3  # the newest records are kept; older ones are superseded (pruned)


@dataclass(frozen=True)
class SummaryRow:
    id: int
    session_key: str
    kind: str
    head_through: int
    through_seq: int
    fingerprint: str
    summary: str
    asks: tuple[str, ...]
    model_id: str | None
    created_at: float


_COLUMNS = (context_summaries.c.id, context_summaries.c.session_key, context_summaries.c.kind,
            context_summaries.c.head_through, context_summaries.c.through_seq,
            context_summaries.c.fingerprint, context_summaries.c.summary,
            context_summaries.c.asks, context_summaries.c.model_id,
            context_summaries.c.created_at)


def _row(row: Any) -> SummaryRow:
    values = list(row)
    values[7] = tuple(str(a) for a in (values[7] or []))
    return SummaryRow(*values)


def fingerprint(conn: Connection, session_key: str, first_seq: int, last_seq: int) -> str:
    """A hash of the events on the head's path with first_seq <= seq <= last_seq, aggregated
    in SQL: how many, their row ids, weighed by seq (a deleted event, or one the head left,
    changes them). One range of the primary key."""
    rowid: ColumnElement[int] = literal_column("transcript_events.rowid")
    row = conn.execute(
        select(func.count(), func.total(rowid), func.total(rowid * transcript_events.c.seq))
        .where(transcript_events.c.session_key == session_key,
               transcript_events.c.seq >= first_seq, transcript_events.c.seq <= last_seq,
               ON_PATH)
    ).one()
    return hashlib.sha256(":".join(str(v) for v in row).encode()).hexdigest()


def add(conn: Connection, session_key: str, *, kind: str, head_through: int, through_seq: int,
        summary: str, asks: list[str], model_id: str | None) -> SummaryRow:
    """Keep a new record (fingerprinted now), pruning all but the newest few of the chat."""
    if kind not in KINDS:
        raise ValueError(f"unknown summary kind {kind!r}")
    print_ = fingerprint(conn, session_key, head_through + 1, through_seq)
    created = now()
    values = {"session_key": session_key, "kind": kind, "head_through": head_through,
              "through_seq": through_seq, "fingerprint": print_, "summary": summary,
              "asks": list(asks), "model_id": model_id, "created_at": created}
    inserted = conn.execute(context_summaries.insert().values(**values)).inserted_primary_key
    new_id = int(inserted[0]) if inserted else 0
    kept = select(context_summaries.c.id).where(
        context_summaries.c.session_key == session_key).order_by(
        context_summaries.c.id.desc()).limit(KEEP_PER_CHAT)
    conn.execute(delete(context_summaries).where(
        context_summaries.c.session_key == session_key, context_summaries.c.id.not_in(kept)))
    return SummaryRow(new_id, session_key, kind, head_through, through_seq, print_, summary,
                      tuple(asks), model_id, created)


def current(conn: Connection, session_key: str) -> SummaryRow | None:
    """The newest record that still describes its events (None: none does)."""
    rows = conn.execute(select(*_COLUMNS).where(
        context_summaries.c.session_key == session_key).order_by(
        context_summaries.c.id.desc()).limit(KEEP_PER_CHAT)).all()
    for row in map(_row, rows):
        if fingerprint(conn, session_key, row.head_through + 1,
                       row.through_seq) == row.fingerprint:
            return row
    return None


def newest(conn: Connection, session_key: str) -> SummaryRow | None:
    """The newest record, stale or not (for tests and the idle chore's bookkeeping)."""
    row = conn.execute(select(*_COLUMNS).where(
        context_summaries.c.session_key == session_key).order_by(
        context_summaries.c.id.desc()).limit(1)).first()
    return _row(row) if row else None


def events_between(conn: Connection, session_key: str, first_seq: int,
                   last_seq: int | None = None) -> list[EventRow]:
    """The chat's events with first_seq <= seq (<= last_seq when given), oldest first."""
    names = EventRow.__dataclass_fields__
    stmt = select(*(transcript_events.c[name] for name in names)).where(
        transcript_events.c.session_key == session_key, transcript_events.c.seq >= first_seq,
        ON_PATH)
    if last_seq is not None:
        stmt = stmt.where(transcript_events.c.seq <= last_seq)
    return [EventRow.of(row) for row in conn.execute(stmt.order_by(transcript_events.c.seq))]


def last_events(conn: Connection, session_key: str, after_seq: int,
                limit: int) -> list[EventRow]:
    """The chat's last `limit` events with seq > after_seq, oldest first."""
    names = EventRow.__dataclass_fields__
    rows = conn.execute(select(*(transcript_events.c[name] for name in names)).where(
        transcript_events.c.session_key == session_key, transcript_events.c.seq > after_seq,
        ON_PATH)
        .order_by(transcript_events.c.seq.desc()).limit(limit)).all()
    return [EventRow.of(row) for row in reversed(rows)]


def idle_chats(conn: Connection, idle_before: float, unsummarized: int,
               limit: int = 20) -> list[str]:
    """Persistent chats last changed before `idle_before`, with no turn running, holding more
    than `unsummarized` events past their newest summary (or in all, with none)."""
    newest_through = select(func.max(context_summaries.c.through_seq)).where(
        context_summaries.c.session_key == sessions.c.key).scalar_subquery()
    rows = conn.execute(select(sessions.c.key).where(
        sessions.c.memory_mode == "persistent", sessions.c.writer_run_id.is_(None),
        sessions.c.updated_at < idle_before,
        sessions.c.last_seq - func.coalesce(newest_through, 0) > unsummarized,
    ).order_by(sessions.c.updated_at).limit(limit))
    return [str(key) for (key,) in rows]
