"""The delivery ledger: every message sent to a channel, recorded before it is sent.

A row is `created` with its text (one part of an answer split to the channel's size), marked
attempted as its send starts (`attempting`, a synced write), then `sent` with the channel's
message id, `failed` with why, or put back (`not_sent`: the channel said it never took it).
A row found attempted but neither sent nor failed at start was being sent when the process
died: it is `unknown` (`interrupted` lists them), never sent again blindly.

A `failed` or `unknown` row waits on the owner (the delivery desk, `needing_owner`): sent
again (`send_again`: owed once more, as `created`), marked `sent` by hand (`marked_sent`), or
given up (`dropped`, a state of its own, kept as a record).

What a linked chat says is owed to its thread by `owe_said`: the chat's answers and notices
after the link's `delivered_seq`, in the order said, and the link moved past them, in one
transaction. Rows go with their chat (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from hearth.store import channels
from hearth.store.db import now
from hearth.store.schema import deliveries, sessions, transcript_events
from hearth.store.transcript import ON_PATH

SAID_KINDS = ("assistant", "notice")  # what a chat says that its thread hears
QUIET = "delivery"  # a notice whose meta carries this is about the ledger itself: not sent


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    session_key: str
    channel: str
    thread: str
    kind: str
    event_seq: int | None
    approval_id: str | None
    part: int
    parts: int
    text: str
    status: str
    message_id: str | None
    attempts: int
    error: str | None
    attempted_at: float | None
    created_at: float

    @classmethod
    def of(cls, row: Any) -> DeliveryRow:
        return cls(**{name: getattr(row, name) for name in cls.__dataclass_fields__})


_ROW = select(*(deliveries.c[name] for name in DeliveryRow.__dataclass_fields__))


def _rows(conn: Connection, query: Any) -> list[DeliveryRow]:
    return [DeliveryRow.of(row) for row in conn.execute(query)]


def owe(conn: Connection, session_key: str, channel: str, thread: str, kind: str,
        texts: list[str], *, event_seq: int | None = None,
        approval_id: str | None = None) -> list[DeliveryRow]:
    """Record the parts of one message as owed to the thread (`created`)."""
    at = now()
    ids = []
    for part, text in enumerate(texts, start=1):
        result = conn.execute(insert(deliveries).values(
            session_key=session_key, channel=channel, thread=thread, kind=kind,
            event_seq=event_seq, approval_id=approval_id, part=part, parts=len(texts),
            text=text, status="created", created_at=at, updated_at=at))
        key = result.inserted_primary_key
        assert key is not None
        ids.append(key[0])
    return _rows(conn, _ROW.where(deliveries.c.id.in_(ids)).order_by(deliveries.c.id))


def owe_said(conn: Connection, session_key: str,
             split: Callable[[str], list[str]]) -> list[DeliveryRow]:
    """What the linked chat said since its link's `delivered_seq`, owed to its thread (each
    message split by `split`), and the link moved past it. Nothing when it has no link."""
    link = channels.of_chat(conn, session_key)
    if link is None:
        return []
    last = conn.execute(select(sessions.c.last_seq).where(sessions.c.key == session_key)
                        ).scalar_one()
    if last <= link.delivered_seq:
        return []
    said = conn.execute(
        select(transcript_events.c.seq, transcript_events.c.kind, transcript_events.c.content,
               transcript_events.c.meta)
        .where(transcript_events.c.session_key == session_key, ON_PATH,
               transcript_events.c.seq > link.delivered_seq,
               transcript_events.c.kind.in_(SAID_KINDS))
        .order_by(transcript_events.c.seq))
    owed: list[DeliveryRow] = []
    for seq, kind, content, meta in said:
        text = content.get("text") if isinstance(content, dict) else None
        if not isinstance(text, str) or not text.strip() or (meta or {}).get(QUIET):
            continue
        kind_of = "reply" if kind == "assistant" else "notice"
        owed += owe(conn, session_key, link.channel, link.thread, kind_of, split(text),
                    event_seq=seq)
    channels.delivered_through(conn, session_key, last)
    return owed


def owes(conn: Connection, session_key: str) -> bool:
    """Whether the chat said anything since its link's cursor (a read, to skip the write)."""
    link = channels.of_chat(conn, session_key)
    if link is None:
        return False
    last = conn.execute(select(sessions.c.last_seq).where(sessions.c.key == session_key)
                        ).scalar_one_or_none()
    return last is not None and last > link.delivered_seq


def due(conn: Connection, channel: str, limit: int = 100,
        thread: str | None = None) -> list[DeliveryRow]:
    """The channel's rows not yet tried (of one thread, if named), oldest first."""
    query = _ROW.where(deliveries.c.channel == channel, deliveries.c.status == "created",
                       deliveries.c.attempted_at.is_(None))
    if thread is not None:
        query = query.where(deliveries.c.thread == thread)
    return _rows(conn, query.order_by(deliveries.c.id).limit(limit))


def get(conn: Connection, delivery_id: int) -> DeliveryRow | None:
    rows = _rows(conn, _ROW.where(deliveries.c.id == delivery_id))
    return rows[0] if rows else None


def of_chat(conn: Connection, session_key: str) -> list[DeliveryRow]:
    return _rows(conn, _ROW.where(deliveries.c.session_key == session_key)
                 .order_by(deliveries.c.id))


def of_approval(conn: Connection, approval_id: str) -> list[DeliveryRow]:
    return _rows(conn, _ROW.where(deliveries.c.approval_id == approval_id)
                 .order_by(deliveries.c.id))


def sent_as(conn: Connection, channel: str, message_id: str) -> DeliveryRow | None:
    """The delivery the channel knows by `message_id` (its id for what was sent), if any."""
    row = conn.execute(_ROW.where(deliveries.c.channel == channel,
                                  deliveries.c.message_id == message_id).limit(1)).first()
    return DeliveryRow.of(row) if row else None


def approvals_asked_in(conn: Connection, channel: str, thread: str) -> list[str]:
    """The approvals whose question was owed to this thread, oldest first (once each)."""
    c = deliveries.c
    rows = conn.execute(select(c.approval_id, func.min(c.id))
                        .where(c.channel == channel, c.thread == thread, c.kind == "approval",
                               c.approval_id.is_not(None))
                        .group_by(c.approval_id).order_by(func.min(c.id)))
    return [str(row[0]) for row in rows]


def _set(conn: Connection, delivery_id: int, **values: Any) -> None:
    conn.execute(update(deliveries).where(deliveries.c.id == delivery_id)
                 .values(updated_at=now(), **values))


def attempting(conn: Connection, delivery_id: int) -> None:
    """The send starts: from here a crash leaves its outcome unknown."""
    conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(
        attempted_at=now(), attempts=deliveries.c.attempts + 1, updated_at=now()))


def sent(conn: Connection, delivery_id: int, message_id: str | None) -> None:
    _set(conn, delivery_id, status="sent", message_id=message_id, error=None)


def failed(conn: Connection, delivery_id: int, error: str) -> None:
    _set(conn, delivery_id, status="failed", error=error[:500])


def not_sent(conn: Connection, delivery_id: int, error: str) -> None:
    """The channel never took it (refused before it arrived): due again."""
    _set(conn, delivery_id, attempted_at=None, error=error[:500])


def unknown(conn: Connection, delivery_id: int, error: str) -> None:
    _set(conn, delivery_id, status="unknown", error=error[:500])


def interrupted(conn: Connection, channel: str) -> list[DeliveryRow]:
    """Rows whose send had started when the process stopped: sent or not, nobody knows."""
    return _rows(conn, _ROW.where(deliveries.c.channel == channel,
                                  deliveries.c.status == "created",
                                  deliveries.c.attempted_at.is_not(None))
                 .order_by(deliveries.c.id))


# -- the delivery desk (engine.delivery.desk): what the owner settles by hand --------------

NEEDS_OWNER = ("failed", "unknown")  # a row nobody will send again without the owner


@dataclass(frozen=True)
class Settled:
    """What an owner's action on a row found: the row as it was before (None: no such row),
    and whether the action took (False: the row was in no state it applies to)."""

    before: DeliveryRow | None
    took: bool


def needing_owner(conn: Connection, limit: int) -> list[tuple[DeliveryRow, float]]:
    """The failed and unknown rows, each with when it came to that, latest first."""
    query = select(*_ROW.selected_columns, deliveries.c.updated_at).where(
        deliveries.c.status.in_(NEEDS_OWNER))
    return [(DeliveryRow.of(row), float(row.updated_at)) for row in conn.execute(
        query.order_by(deliveries.c.updated_at.desc(), deliveries.c.id.desc()).limit(limit))]


def count_needing_owner(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(deliveries).where(
        deliveries.c.status.in_(NEEDS_OWNER))).scalar_one())


def _settle(conn: Connection, delivery_id: int, **values: Any) -> Settled:
    """Change a failed or unknown row (one conditional write: of two at once, one takes)."""
    before = get(conn, delivery_id)
    took = conn.execute(update(deliveries).where(
        deliveries.c.id == delivery_id, deliveries.c.status.in_(NEEDS_OWNER))
        .values(updated_at=now(), **values)).rowcount == 1
    return Settled(before, took)


def send_again(conn: Connection, delivery_id: int) -> Settled:
    """Owed again (`created`, not attempted): the channel's sender takes it as any due row."""
    return _settle(conn, delivery_id, status="created", attempted_at=None)


def marked_sent(conn: Connection, delivery_id: int, note: str) -> Settled:
    """The owner says it arrived: `sent`, with `note` where the error was."""
    return _settle(conn, delivery_id, status="sent", error=note[:500])


def dropped(conn: Connection, delivery_id: int) -> Settled:
    """The owner gives it up: `dropped`, never sent, kept as a record."""
    return _settle(conn, delivery_id, status="dropped")
