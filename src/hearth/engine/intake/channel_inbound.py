"""A channel message taken in: the one admission every surface goes through, from a thread.

In ONE transaction: the channel's own id for the message is recorded (a redelivery after a
crash finds it and is admitted nothing), the thread's chat is found by its link (or, when the
thread has none or its chat is gone — deleted, archived, being deleted — a new chat is made
and linked to it), the message and its run are admitted with where the line came from
(`source_channel`, `source_thread`, `source_user`, written once), and the channel's cursor is
moved past it. So the channel commits its offset only with the admission it passes. A
message is never sent into a running turn (steering): a thread's messages are answered one by
one, in order, by the chat's lane.

A message from anyone but the channel's owner carries `meta.guest` (their name): the model
reads it fenced as theirs (`engine.turn.context`), and its turn runs no call that needs the owner's
approval without asking the owner (`engine.turn.gate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection

from hearth.config import Config
from hearth.engine.delivery.events import Bus, message_frame
from hearth.engine.intake import admission
from hearth.engine.intake.admission import Admitted
from hearth.engine.intake.attachment_desk import AttachmentDesk
from hearth.faults import crash_point
from hearth.privacy import principal as principals
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.chats import Choices, NewChat
from hearth.store import channels as channel_store, sessions as session_store
from hearth.store.db import Database
from hearth.store.transcript import EventRow

ATTACHMENT_NOTE = "[Attached: {names}. Hearth does not open these.]"


class InboundHost(Protocol):
    """What taking in a channel's message needs of the engine."""

    db: Database
    bus: Bus
    accepting: bool  # False once the gateway stops: nothing more is admitted
    deleting: set[str]  # chats being deleted: a thread's next message opens a new chat

    def choices(self) -> Choices: ...

    def dispatch(self, session_key: str) -> None: ...

    @property
    def config(self) -> Config: ...

    @property
    def attachments(self) -> AttachmentDesk: ...


@dataclass(frozen=True)
class Inbound:
    """One message as a channel took it in."""

    channel: str  # "telegram", "webhook"
    thread: str  # the channel's conversation (a Telegram chat id)
    inbound_id: str  # the channel's own id for this delivery (Telegram's update_id)
    sender: str  # the channel's id of who sent it
    sender_name: str
    text: str
    owner: bool  # the sender is the channel's owner
    owner_dm: bool  # the thread is the owner's own direct chat
    attachments: tuple[str, ...] = ()  # what it carried that was not fetched (named only)
    cursor: int | None = None  # the channel's cursor once this message is taken in
    token: str | None = None  # the opaque position kept with that cursor (Matrix's since)
    files: tuple[tuple[str, bytes], ...] = ()  # (name, bytes): what it carried, fetched
    # what the channel keeps with the message to answer in its thread later, after a restart
    # too (email: the subject and References); read back by `answering`
    kept: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Files:
    """A channel message's files kept in its chat before it is admitted."""

    key: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Received:
    """What became of an inbound message: `admitted` is None for a redelivery."""

    session_key: str | None
    admitted: Admitted | None
    opened: bool = False


def text_of(inbound: Inbound) -> str:
    """What is admitted: the text, and the names of what was attached and not fetched."""
    if not inbound.attachments:
        return inbound.text
    note = ATTACHMENT_NOTE.format(names=", ".join(inbound.attachments))
    return f"{inbound.text}\n\n{note}" if inbound.text.strip() else note


def meta_of(inbound: Inbound) -> dict[str, Any]:
    meta: dict[str, Any] = {"sender_name": inbound.sender_name}
    if inbound.attachments:
        meta["attachments"] = list(inbound.attachments)
    if not inbound.owner:
        meta["guest"] = inbound.sender_name or inbound.sender
    if inbound.kept:
        meta["kept"] = inbound.kept
    return meta


def principal_of(inbound: Inbound) -> Principal:
    """On whose behalf a channel message is admitted: the owner when the channel knows the
    sender as the owner (`owner_ids`), else that sender, a guest."""
    if inbound.owner:
        return principals.OWNER  # the channel authenticated its owner
    return principals.guest(inbound.channel, inbound.sender)


async def receive(engine: InboundHost, inbound: Inbound) -> Received:
    """Admit a channel message (once), and wake its chat's lane."""
    text = text_of(inbound)
    admission.validate(text, None, admission.Files(tuple(name for name, _ in inbound.files), 0)
                       if inbound.files else None)
    if not engine.accepting:
        raise admission.AdmissionError("shutting_down", 503, "The gateway is stopping.")
    new = chats.checked_new(origin=inbound.channel, choices=engine.choices())
    files = await _kept_files(engine, inbound, new) if inbound.files else None
    if inbound.files and files is None:
        return Received(None, None)  # taken in before: a redelivery
    received, event = await engine.db.writing(
        _take, inbound, text, new, frozenset(engine.deleting),
        admission.Files(files.ids, engine.config.attachments.max_message_bytes)
        if files else None)
    if event is None or received.session_key is None:
        return received
    crash_point("channel_admitted")
    engine.bus.publish(received.session_key, message_frame(event))
    engine.dispatch(received.session_key)
    return received


async def _kept_files(engine: InboundHost, inbound: Inbound, new: NewChat) -> _Files | None:
    """The message's files kept in the chat its thread continues (made and linked now if
    need be): before its admission, which then sends them (None: it was taken in before).
    A crash between the two keeps them unsent in the chat; the redelivery sends new ones."""
    key = await engine.db.writing(_thread_chat_for_files, inbound, new,
                                  frozenset(engine.deleting))
    if key is None:
        return None
    ids = [(await engine.attachments.receive_bytes(key, name, data)).id
           for name, data in inbound.files]
    return _Files(key, tuple(ids))


def _thread_chat_for_files(conn: Connection, inbound: Inbound, new: NewChat,
                           deleting: frozenset[str]) -> str | None:
    if channel_store.was_taken(conn, inbound.channel, inbound.inbound_id):
        return None
    return _chat_of_thread(conn, inbound, new, deleting)[0]


def _take(conn: Connection, inbound: Inbound, text: str, new: NewChat,
          deleting: frozenset[str], files: admission.Files | None = None
          ) -> tuple[Received, EventRow | None]:
    if inbound.cursor is not None:
        channel_store.move_cursor(conn, inbound.channel, inbound.cursor, inbound.token)
    if not channel_store.take_inbound(conn, inbound.channel, inbound.inbound_id):
        return Received(None, None), None
    key, opened = _chat_of_thread(conn, inbound, new, deleting)
    admitted, event = admission.admit_in(
        conn, key, text, f"{inbound.channel}:{inbound.inbound_id}", inbound.channel, "chat",
        meta_of(inbound), source=(inbound.thread, inbound.sender),
        principal=principal_of(inbound), files=files)
    return Received(key, admitted, opened), event


def _chat_of_thread(conn: Connection, inbound: Inbound, new: NewChat,
                    deleting: frozenset[str]) -> tuple[str, bool]:
    """The chat the thread continues, or a new one linked to it."""
    link = channel_store.of_thread(conn, inbound.channel, inbound.thread)
    if link is not None and link.session_key not in deleting:
        session = session_store.get(conn, link.session_key)
        if session is not None and not session.archived:
            return session.key, False
    session = chats.insert_new(conn, new)
    channel_store.link(conn, session.key, inbound.channel, inbound.thread, inbound.owner_dm)
    return session.key, True


async def skip(engine: InboundHost, channel: str, cursor: int,
               token: str | None = None) -> None:
    """Move the channel's cursor (and its token) past something it takes nothing from."""
    await engine.db.writing(channel_store.move_cursor, channel, cursor, token)


async def cursor_of(engine: InboundHost, channel: str) -> int | None:
    return await engine.db.reading(channel_store.cursor, channel)


async def cursor_token_of(engine: InboundHost, channel: str) -> tuple[int | None, str | None]:
    return await engine.db.reading(channel_store.cursor_token, channel)


async def answering(engine: InboundHost, session_key: str, channel: str,
                    thread: str) -> tuple[str | None, dict[str, Any]]:
    """The chat's title, and what the channel kept with the latest message it took in from
    the thread (`Inbound.kept`)."""
    return await engine.db.reading(channel_store.answering, session_key, channel, thread)


async def owner_dms(engine: InboundHost, channel: str) -> list[str]:
    """The channel's threads known (linked) as the owner's own direct chat, newest first."""
    return await engine.db.reading(channel_store.owner_dms, channel)


async def take_only(engine: InboundHost, inbound: Inbound) -> bool:
    """Record the message as taken in (and move the cursor) without admitting it: a reply
    word that answered an approval. False when it was taken in before."""
    return await engine.db.writing(_take_only, inbound)


def _take_only(conn: Connection, inbound: Inbound) -> bool:
    if inbound.cursor is not None:
        channel_store.move_cursor(conn, inbound.channel, inbound.cursor, inbound.token)
    return channel_store.take_inbound(conn, inbound.channel, inbound.inbound_id)


async def thread_chat(engine: InboundHost, channel: str, thread: str) -> str | None:
    """The chat the thread continues now, if any."""
    link = await engine.db.reading(channel_store.of_thread, channel, thread)
    return link.session_key if link is not None else None
