"""Channel links, inbound ids taken in, and channel cursors: what a channel keeps in the store.

A link ties one chat to one channel thread (both sides unique): linking a chat to a thread
takes the thread from whichever chat had it and moves the chat off any thread it was on, in
one transaction (`link`). A link's `delivered_seq` is where the chat's delivery ledger has
got to (`store.deliveries` reads and moves it). A link goes with its chat (ON DELETE CASCADE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from hearth.store.db import now
from hearth.store.refusable import refusable
from hearth.store.schema import (
    channel_cursors,
    channel_inbound,
    channel_links,
    sessions,
    transcript_events,
)


@dataclass(frozen=True)
class LinkRow:
    session_key: str
    channel: str
    thread: str
    owner_dm: bool
    delivered_seq: int
    created_at: float

    @classmethod
    def of(cls, row: Any) -> LinkRow:
        return cls(row.session_key, row.channel, row.thread, bool(row.owner_dm),
                   row.delivered_seq, row.created_at)


@dataclass(frozen=True)
class Relinked:
    """What a `link` changed: the link made, the one the chat left (None: it had none, or it
    was on this thread already) and the chat that lost the thread (None: no other had it)."""

    link: LinkRow
    left: LinkRow | None
    displaced: str | None


def of_chat(conn: Connection, session_key: str) -> LinkRow | None:
    row = conn.execute(select(channel_links).where(
        channel_links.c.session_key == session_key)).first()
    return LinkRow.of(row) if row else None


def of_thread(conn: Connection, channel: str, thread: str) -> LinkRow | None:
    row = conn.execute(select(channel_links).where(
        channel_links.c.channel == channel, channel_links.c.thread == thread)).first()
    return LinkRow.of(row) if row else None


def of_chats(conn: Connection, keys: list[str]) -> dict[str, LinkRow]:
    if not keys:
        return {}
    rows = conn.execute(select(channel_links).where(channel_links.c.session_key.in_(keys)))
    return {row.session_key: LinkRow.of(row) for row in rows}


def answering(conn: Connection, session_key: str, channel: str,
              thread: str) -> tuple[str | None, dict[str, Any]]:
    """The chat's title, and what the channel kept (`meta["kept"]`) with the latest message
    the chat took in from the thread ({} when none)."""
    title = conn.execute(select(sessions.c.title).where(sessions.c.key == session_key)
                         ).scalar_one_or_none()
    meta = conn.execute(select(transcript_events.c.meta).where(
        transcript_events.c.session_key == session_key,
        transcript_events.c.source_channel == channel,
        transcript_events.c.source_thread == thread,
    ).order_by(transcript_events.c.seq.desc()).limit(1)).scalar_one_or_none()
    kept = meta.get("kept") if isinstance(meta, dict) else None
    return title, kept if isinstance(kept, dict) else {}


def owner_dms(conn: Connection, channel: str) -> list[str]:
    """The channel's threads linked as the owner's own direct chat, the newest link first."""
    return list(conn.execute(select(channel_links.c.thread).where(
        channel_links.c.channel == channel, channel_links.c.owner_dm.is_(True))
        .order_by(channel_links.c.created_at.desc())).scalars())


def linked_chats(conn: Connection) -> list[str]:
    return list(conn.execute(select(channel_links.c.session_key)).scalars())


def link(conn: Connection, session_key: str, channel: str, thread: str,
         owner_dm: bool) -> Relinked:
    """The chat continues on this thread from now on: what it said so far is not owed there
    (its delivery starts at the chat's last event)."""
    left = of_chat(conn, session_key)
    had = of_thread(conn, channel, thread)
    if left is not None and had is not None and left.session_key == had.session_key:
        return Relinked(left, None, None)  # continued where it already is
    conn.execute(delete(channel_links).where(channel_links.c.session_key == session_key))
    conn.execute(delete(channel_links).where(channel_links.c.channel == channel,
                                             channel_links.c.thread == thread))
    last = conn.execute(select(sessions.c.last_seq).where(sessions.c.key == session_key)
                        ).scalar_one()
    row = {"session_key": session_key, "channel": channel, "thread": thread,
           "owner_dm": owner_dm, "delivered_seq": last, "created_at": now()}
    conn.execute(insert(channel_links).values(row))
    return Relinked(LinkRow(**row), left, had.session_key if had is not None else None)


def unlink(conn: Connection, session_key: str) -> LinkRow | None:
    """The chat answers on no channel any more; the link it had, if any."""
    had = of_chat(conn, session_key)
    conn.execute(delete(channel_links).where(channel_links.c.session_key == session_key))
    return had


def delivered_through(conn: Connection, session_key: str, seq: int) -> None:
    conn.execute(update(channel_links).where(channel_links.c.session_key == session_key)
                 .values(delivered_seq=seq))


def was_taken(conn: Connection, channel: str, inbound_id: str) -> bool:
    """Whether the channel's message `inbound_id` was taken in already."""
    return conn.execute(select(channel_inbound.c.received_at).where(
        channel_inbound.c.channel == channel,
        channel_inbound.c.inbound_id == inbound_id)).first() is not None


def take_inbound(conn: Connection, channel: str, inbound_id: str) -> bool:
    """Record that the channel's message `inbound_id` is taken in; False when it was before.
    Call it inside the transaction that admits the message, so both or neither happen."""
    seen = conn.execute(select(channel_inbound.c.received_at).where(
        channel_inbound.c.channel == channel,
        channel_inbound.c.inbound_id == inbound_id)).first()
    if seen is not None:
        return False
    try:
        with refusable(conn):
            conn.execute(insert(channel_inbound).values(channel=channel, inbound_id=inbound_id,
                                                        received_at=now()))
    except IntegrityError:
        return False
    return True


def forget_inbound_before(conn: Connection, before: float) -> int:
    """Drop the ids taken in before `before` (a channel redelivers only recent messages)."""
    return conn.execute(delete(channel_inbound).where(
        channel_inbound.c.received_at < before)).rowcount


def cursor(conn: Connection, channel: str) -> int | None:
    return conn.execute(select(channel_cursors.c.position).where(
        channel_cursors.c.channel == channel)).scalar()


def cursor_token(conn: Connection, channel: str) -> tuple[int | None, str | None]:
    """The channel's cursor and the token kept with it."""
    row = conn.execute(select(channel_cursors.c.position, channel_cursors.c.token).where(
        channel_cursors.c.channel == channel)).first()
    return (None, None) if row is None else (row[0], row[1])


def move_cursor(conn: Connection, channel: str, position: int,
                token: str | None = None) -> None:
    """The channel's cursor (and its token) moves forward only (a stale writer never moves
    it back)."""
    current = cursor(conn, channel)
    if current is None:
        conn.execute(insert(channel_cursors).values(channel=channel, position=position,
                                                    token=token, updated_at=now()))
    elif position > current:
        conn.execute(update(channel_cursors).where(channel_cursors.c.channel == channel)
                     .values(position=position, token=token, updated_at=now()))
