"""The engine's side of channel delivery: what a linked chat owes its thread, the ledger's
steps, and where a chat answers (its link), for the channels and the surfaces.

The ledger itself is `store.deliveries`; the links are `store.channels`. A chat says
something on its thread only through here: `owe_said` turns what it said since its link's
cursor into ledger rows (split to the channel's size), `owe_approval` a question waiting on
the owner, `continue_on` moves a chat's link and owes the one-time note to the owner's own
direct chat it left. What went wrong with a delivery is said in the chat as a notice that is
itself never delivered (`meta.delivery`), so it cannot loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection

from hearth.engine.delivery.events import Bus, message_frame
from hearth.errors import Refusal
from hearth.privacy import principal as principals
from hearth.store import (
    approvals as approval_store,
    channels as channel_store,
    deliveries,
    sessions as session_store,
    transcript,
)
from hearth.store.channels import LinkRow, Relinked
from hearth.store.db import Database
from hearth.store.deliveries import DeliveryRow

Delivery = DeliveryRow  # the surfaces' name for a ledger row
Link = LinkRow
Split = Callable[[str], list[str]]
UNKNOWN = ("Part {part} of {parts} of a message to {channel} may not have arrived: its send "
           "was cut off (the gateway stopped, or the connection broke), and {channel} cannot "
           "say whether it did, so it was not sent again.")
FAILED = "A message to {channel} could not be delivered ({why}). It is kept here."


class DeliveryHost(Protocol):
    """What the delivery ledger's steps need of the engine: its store, and its live bus for
    what is said in a chat."""

    db: Database
    bus: Bus


@dataclass(frozen=True)
class Moved:
    """A chat's link moved (`continue_on`): the new link, and the thread it left (if any)."""

    link: LinkRow
    left: LinkRow | None
    displaced: str | None


def link_view(link: LinkRow | None) -> dict[str, Any] | None:
    if link is None:
        return None
    return {"channel": link.channel, "thread": link.thread, "owner_dm": link.owner_dm}


async def link_of(engine: DeliveryHost, session_key: str) -> LinkRow | None:
    return await engine.db.reading(channel_store.of_chat, session_key)


async def links_of(engine: DeliveryHost, keys: list[str]) -> dict[str, LinkRow]:
    return await engine.db.reading(channel_store.of_chats, keys)


async def owe_said(engine: DeliveryHost, session_key: str, split: Split) -> list[DeliveryRow]:
    """What the linked chat said since its link's cursor, recorded as owed. Bookkeeping (not
    synced): rows and cursor move together, so a crash that loses them owes them again at
    the next start; the synced mark of a send's start (`attempting`) persists them first."""
    if not await engine.db.reading(deliveries.owes, session_key):
        return []
    return await engine.db.writing(deliveries.owe_said, session_key, split, durable=False)


async def owe_approval(engine: DeliveryHost, approval_id: str, text: str,
                       owner_thread: Callable[[str], str | None]) -> list[DeliveryRow]:
    """Ask the approval on the channel of the chat's thread (once per approval): on the
    thread itself for the owner's own work, and for anyone else's (a guest's) in the owner's
    own thread on that channel (`owner_thread(channel)`), never where the guest could be
    asked; nothing when the chat is not linked, or no owner's thread is known (the dashboard
    asks)."""
    return await engine.db.writing(_owe_approval, approval_id, text, owner_thread)


def _owe_approval(conn: Connection, approval_id: str, text: str,
                  owner_thread: Callable[[str], str | None]) -> list[DeliveryRow]:
    row = approval_store.get(conn, approval_id)
    if row is None or row.status != "pending" or deliveries.of_approval(conn, approval_id):
        return []
    link = channel_store.of_chat(conn, row.session_key)
    if link is None:
        return []
    thread = link.thread
    if not principals.decode(row.principal).is_owner:
        owners = owner_thread(link.channel)
        if owners is None:
            return []
        thread = owners
    return deliveries.owe(conn, row.session_key, link.channel, thread, "approval",
                          [text], approval_id=approval_id)


async def asked_in(engine: DeliveryHost, channel: str, thread: str) -> list[str]:
    """The ids of the approvals still pending that were asked in this thread (a guest's
    asked in the owner's own thread among them), oldest first."""
    return await engine.db.reading(_asked_in, channel, thread)


def _asked_in(conn: Connection, channel: str, thread: str) -> list[str]:
    pending = {row.id for row in approval_store.pending(conn)}
    asked = deliveries.approvals_asked_in(conn, channel, thread)
    return [approval_id for approval_id in asked if approval_id in pending]


async def asked_on(engine: DeliveryHost, approval_id: str, channel: str) -> bool:
    """Whether the approval was asked on this channel (its question is in the ledger there):
    a channel answers only what it was asked."""
    rows = await engine.db.reading(deliveries.of_approval, approval_id)
    return any(row.channel == channel for row in rows)


async def sent_as(engine: DeliveryHost, channel: str, message_id: str) -> DeliveryRow | None:
    """What the gateway sent that the channel knows by `message_id`, if it did."""
    return await engine.db.reading(deliveries.sent_as, channel, message_id)


async def pending_approvals(engine: DeliveryHost, session_key: str) -> list[str]:
    """The ids of the chat's approvals still waiting on the owner, oldest first."""
    rows = await engine.db.reading(approval_store.pending)
    return [row.id for row in rows if row.session_key == session_key]


async def continue_on(engine: DeliveryHost, session_key: str, channel: str, thread: str,
                      owner_dm: bool, note: str | None, opening: str | None = None) -> Moved:
    """Move the chat's link to the thread. When the thread it left was the owner's own
    direct chat, `note` is owed there once (a group or someone else's chat hears nothing).
    `opening` (its `{title}` the chat's) is owed in the new thread, with the move."""
    moved: Relinked = await engine.db.writing(_relink, session_key, channel, thread, owner_dm,
                                              note, opening)
    return Moved(moved.link, moved.left, moved.displaced)


def _relink(conn: Connection, session_key: str, channel: str, thread: str, owner_dm: bool,
            note: str | None, opening: str | None) -> Relinked:
    session = session_store.get(conn, session_key)
    if session is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {session_key!r}.")
    moved = channel_store.link(conn, session_key, channel, thread, owner_dm)
    left = moved.left
    if left is not None and left.owner_dm and note:
        deliveries.owe(conn, session_key, left.channel, left.thread, "note", [note])
    if opening and (left is None or (left.channel, left.thread) != (channel, thread)):
        title = session.title or session.key
        deliveries.owe(conn, session_key, channel, thread, "note", [opening.format(title=title)])
    return moved


async def unlink(engine: DeliveryHost, session_key: str, note: str | None) -> LinkRow | None:
    """The chat answers on no channel; the owner's own chat it left is owed `note`."""
    return await engine.db.writing(_unlink, session_key, note)


def _unlink(conn: Connection, session_key: str, note: str | None) -> LinkRow | None:
    if session_store.get(conn, session_key) is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {session_key!r}.")
    left = channel_store.unlink(conn, session_key)
    if left is not None and left.owner_dm and note:
        deliveries.owe(conn, session_key, left.channel, left.thread, "note", [note])
    return left


async def may_link(engine: DeliveryHost, session_key: str) -> bool:
    """Whether the chat may answer on a channel: a kept (persistent) chat only."""
    session = await engine.db.reading(session_store.get, session_key)
    if session is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {session_key!r}.")
    return session.memory_mode == "persistent"


async def due(engine: DeliveryHost, channel: str, limit: int = 100,
              thread: str | None = None) -> list[DeliveryRow]:
    return await engine.db.reading(deliveries.due, channel, limit, thread)


async def linked_chats(engine: DeliveryHost) -> list[str]:
    return await engine.db.reading(channel_store.linked_chats)


async def attempting(engine: DeliveryHost, delivery_id: int) -> None:
    await engine.db.writing(deliveries.attempting, delivery_id)  # synced: before the send


async def sent(engine: DeliveryHost, delivery_id: int, message_id: str | None) -> None:
    await engine.db.writing(deliveries.sent, delivery_id, message_id, durable=False)


async def not_sent(engine: DeliveryHost, delivery_id: int, why: str) -> None:
    await engine.db.writing(deliveries.not_sent, delivery_id, why)


async def failed(engine: DeliveryHost, row: DeliveryRow, why: str) -> None:
    """The channel refused it for good: recorded, and said in the chat."""
    await engine.db.writing(deliveries.failed, row.id, why)
    await _tell(engine, row, FAILED.format(channel=row.channel.title(), why=why), "failed")


async def interrupted(engine: DeliveryHost, channel: str, resend_is_safe: bool) -> int:
    """At start: the sends a crash interrupted. A channel that drops a message it already
    has (by the delivery's id) is sent them again; any other's are `unknown`, said in the
    chat, and never sent again. How many were found."""
    rows = await engine.db.reading(deliveries.interrupted, channel)
    for row in rows:
        if resend_is_safe:
            await engine.db.writing(deliveries.not_sent, row.id, "interrupted; sent again")
            continue
        await unsure(engine, row, "interrupted by a restart")
    return len(rows)


async def unsure(engine: DeliveryHost, row: DeliveryRow, why: str) -> None:
    """A send that may have arrived: `unknown`, said in the chat, never sent again."""
    await engine.db.writing(deliveries.unknown, row.id, why)
    sentence = UNKNOWN.format(part=row.part, parts=row.parts, channel=row.channel.title())
    await _tell(engine, row, sentence, "unknown")


async def _tell(engine: DeliveryHost, row: DeliveryRow, sentence: str, what: str) -> None:
    event = await engine.db.writing(_notice, row.session_key, sentence,
                                    {deliveries.QUIET: what, "delivery_id": row.id})
    if event is not None:
        engine.bus.publish(row.session_key, message_frame(event))


def _notice(conn: Connection, session_key: str, sentence: str,
            meta: dict[str, Any]) -> transcript.EventRow | None:
    if session_store.get(conn, session_key) is None:
        return None
    return transcript.append(conn, session_key, "notice", {"text": sentence}, meta=meta)


async def of_chat(engine: DeliveryHost, session_key: str) -> list[DeliveryRow]:
    return await engine.db.reading(deliveries.of_chat, session_key)
