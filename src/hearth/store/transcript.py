"""The transcript aggregate: the chat's permanent record, one event per row.

Appending reads and bumps the session's own counter (`last_seq`) and inserts one row: a fixed
number of primary-key operations whatever the transcript's length. A writer's claim on the
session is checked inside the same transaction as its append.

The transcript is a tree: each event's parent is the head when it was appended, and the head
may be moved back (`store.branches`). The readers here read the head's path only (`ON_PATH`):
what was left beside it (an earlier variant, what a rewind passed) is kept, unread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from hearth.masking import mask_value
from hearth.store.db import now
from hearth.store.errors import AlreadyAppended, SessionNotFound, WriterClaimLost
from hearth.store.refusable import refusable
from hearth.store.schema import sessions, transcript_events

KINDS = ("user", "assistant", "tool_call", "tool_result", "notice", "summary")


@dataclass(frozen=True)
class EventRow:
    session_key: str
    seq: int
    event_id: str
    parent_event_id: str | None
    idempotency_key: str | None
    kind: str
    content: dict[str, Any]
    meta: dict[str, Any]
    source_channel: str | None
    run_id: str | None
    created_at: float
    source_thread: str | None = None  # where the line came from (written once, by its door)
    source_user: str | None = None

    @classmethod
    def of(cls, row: Any) -> EventRow:
        """From a row selected with `_EVENT` (its columns in this class's field order)."""
        return cls(*row)


_EVENT = select(*(transcript_events.c[name] for name in EventRow.__dataclass_fields__))
# FOR UPDATE: on PostgreSQL two gateways may append to one chat at once (a message admitted
# on each); the row lock makes the second read the first's seq once it commits (SQLite has
# one writer and leaves the clause out)
_HEAD = select(
    sessions.c.last_seq, sessions.c.head_event_id, sessions.c.writer_run_id
).where(sessions.c.key == bindparam("b_key")).with_for_update()
_BUMP = (
    update(sessions)
    .where(sessions.c.key == bindparam("b_key"))
    .values(
        last_seq=bindparam("b_seq"),
        head_event_id=bindparam("b_head"),
        message_count=sessions.c.message_count + 1,
        updated_at=bindparam("b_at"),
    )
)
_INSERT = transcript_events.insert()
_FIND = _EVENT.where(
    transcript_events.c.session_key == bindparam("b_key"),
    transcript_events.c.idempotency_key == bindparam("b_idem"),
)
ON_PATH = transcript_events.c.off_path.is_(False)
_U = transcript_events.alias("u")  # the same table again, for a correlated subquery
_WINDOW = (
    _EVENT
    .where(transcript_events.c.session_key == bindparam("b_key"), ON_PATH)
    .order_by(transcript_events.c.seq.desc())
    .limit(bindparam("b_limit"))
)


def append(
    conn: Connection,
    session_key: str,
    kind: str,
    content: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    run_id: str | None = None,
    writer: str | None = None,
    idempotency_key: str | None = None,
    source_channel: str | None = None,
    source_thread: str | None = None,
    source_user: str | None = None,
) -> EventRow:
    """Append one event. With `writer`, the append fails unless that run holds the claim.

    Raises SessionNotFound, WriterClaimLost, or AlreadyAppended (same idempotency key: the
    unique constraint says so, and nothing is changed). A notice (Hearth's own words, which
    may quote a provider's error) is kept masked; what the user and the model wrote is not.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    if kind == "notice":
        content = mask_value(content)
    head = conn.execute(_HEAD, {"b_key": session_key}).first()
    if head is None:
        raise SessionNotFound(session_key)
    if writer is not None and head.writer_run_id != writer:
        raise WriterClaimLost(session_key, writer)
    row = {
        "session_key": session_key,
        "seq": head.last_seq + 1,
        "event_id": uuid.uuid4().hex,
        "parent_event_id": head.head_event_id,
        "idempotency_key": idempotency_key,
        "kind": kind,
        "content": content,
        "meta": meta or {},
        "source_channel": source_channel,
        "source_thread": source_thread,
        "source_user": source_user,
        "run_id": run_id,
        "created_at": now(),
    }
    try:
        with refusable(conn):  # first: a refused insert leaves the transaction as it was
            conn.execute(_INSERT, row)
    except IntegrityError:
        if idempotency_key is not None and find(conn, session_key, idempotency_key):
            raise AlreadyAppended(session_key, idempotency_key) from None
        raise
    conn.execute(_BUMP, {"b_key": session_key, "b_seq": row["seq"], "b_head": row["event_id"],
                         "b_at": row["created_at"]})
    return EventRow(**{k: row[k] for k in EventRow.__dataclass_fields__})


def find(conn: Connection, session_key: str, idempotency_key: str) -> EventRow | None:
    row = conn.execute(_FIND, {"b_key": session_key, "b_idem": idempotency_key}).first()
    return EventRow.of(row) if row else None


def first_with_key(conn: Connection, idempotency_key: str, since: float) -> EventRow | None:
    """The first event of a chat active since `since` (UNIX seconds) whose idempotency key
    is `idempotency_key`: a chat opened by that message. Read through the chats active since
    then (an index range) and each one's first event (its primary key), so the cost is the
    number of recent chats, whatever the transcripts hold."""
    return with_key(conn, idempotency_key, since, first=True)


def with_key(conn: Connection, idempotency_key: str, since: float,
             first: bool = False) -> EventRow | None:
    """An event of a chat active since `since` whose idempotency key is `idempotency_key`,
    wherever it stands in its chat (with `first`, its chat's first event alone): read through
    the chats active since then and each one's (chat, key) index."""
    recent = select(sessions.c.key).where(sessions.c.updated_at >= since)
    found = _EVENT.where(transcript_events.c.session_key.in_(recent),
                         transcript_events.c.idempotency_key == idempotency_key)
    if first:
        found = found.where(transcript_events.c.seq == 1)
    row = conn.execute(found.limit(1)).first()
    return EventRow.of(row) if row else None


def window(
    conn: Connection, session_key: str, limit: int, before: int | None = None
) -> list[EventRow]:
    """The last `limit` events on the head's path (with seq < before, when given), oldest
    first."""
    stmt = _WINDOW if before is None else _WINDOW.where(transcript_events.c.seq < before)
    rows = [EventRow.of(row) for row in conn.execute(stmt, {"b_key": session_key,
                                                               "b_limit": limit})]
    rows.reverse()
    return rows


def after(conn: Connection, session_key: str, after_seq: int, limit: int = 500) -> list[EventRow]:
    """Events on the head's path with seq > after_seq, oldest first (for replay to a
    reconnecting client)."""
    stmt = (
        _EVENT
        .where(transcript_events.c.session_key == session_key, ON_PATH)
        .where(transcript_events.c.seq > after_seq)
        .order_by(transcript_events.c.seq)
        .limit(limit)
    )
    return [EventRow.of(row) for row in conn.execute(stmt)]




def of_run(conn: Connection, session_key: str, run_id: str, from_seq: int) -> list[EventRow]:
    """A run's events on the head's path: none comes before its user message, so the scan
    starts there."""
    stmt = (
        _EVENT
        .where(transcript_events.c.session_key == session_key, ON_PATH)
        .where(transcript_events.c.seq >= from_seq, transcript_events.c.run_id == run_id)
        .order_by(transcript_events.c.seq)
    )
    return [EventRow.of(row) for row in conn.execute(stmt)]


_ANSWER = (
    _EVENT
    .where(transcript_events.c.session_key == bindparam("b_key"),
           transcript_events.c.seq >= bindparam("b_from"),
           transcript_events.c.seq <= bindparam("b_upto"),
           transcript_events.c.run_id == bindparam("b_run"),
           transcript_events.c.kind == "assistant")
    .order_by(transcript_events.c.seq.desc())
    .limit(1)
)


def answer_of(conn: Connection, session_key: str, run_id: str, from_seq: int,
              upto_seq: int) -> EventRow | None:
    """A run's answer: its last assistant message with seq in [from_seq, upto_seq] (its user
    message's seq to the seq it ended at: a primary-key range), on the head's path or not
    (an answer a regenerate set aside is still that run's)."""
    row = conn.execute(_ANSWER, {"b_key": session_key, "b_from": from_seq, "b_upto": upto_seq,
                                 "b_run": run_id}).first()
    return EventRow.of(row) if row else None


def at(conn: Connection, session_key: str, seq: int) -> EventRow | None:
    row = conn.execute(_EVENT.where(
        transcript_events.c.session_key == session_key, transcript_events.c.seq == seq)).first()
    return EventRow.of(row) if row else None


def openings(conn: Connection, session_keys: list[str]) -> dict[str, str]:
    """Each chat's first message on its path, when it is one of the owner's (the words an
    untitled chat is shown by): its text, or the names of the files it sent when it has
    none. An edited first message is the edit (the first one is off the path). One
    primary-key walk per chat, from its start to its first message on the path."""
    if not session_keys:
        return {}
    first = select(_U.c.seq).where(
        _U.c.session_key == transcript_events.c.session_key, _U.c.kind == "user",
        _U.c.off_path.is_(False)).order_by(_U.c.seq).limit(1).scalar_subquery()
    rows = conn.execute(
        select(transcript_events.c.session_key, transcript_events.c.content,
               transcript_events.c.meta)
        .where(transcript_events.c.session_key.in_(session_keys),
               transcript_events.c.seq == first))
    return {key: _opening(content, meta) for key, content, meta in rows}


def _opening(content: object, meta: object) -> str:
    """A first message's words, else its files' names; content of another shape (a bad
    row) gives no words."""
    text = str(content.get("text", "")) if isinstance(content, dict) else ""
    if text.strip() or not isinstance(meta, dict):
        return text
    files = meta.get("attachments")
    names = [str(f.get("name", "")) for f in files if isinstance(f, dict)] \
        if isinstance(files, list) else []
    return ", ".join(name for name in names if name)
