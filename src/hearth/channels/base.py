"""The channel protocol: what every channel adapter is, and the few words they share.

An adapter owns its connection to one outside service: it takes messages in (handing each
to its `Desk`, which admits it through the engine, once), sends what the delivery ledger owes
a thread (`send`, which says by the exception it raises whether the message might have
arrived), shows that a turn is running (`typing`), and reports its health in a sentence. It
never touches the store, the transcript or a lane: the manager (`channels.manager`) does,
through the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hearth.engine.intake.channel_inbound import Inbound, Received

DECISIONS = ("allow_once", "allow_always", "deny")
# Reply words that answer an approval on a channel without buttons (or when typed anyway).
REPLY_WORDS = {"yes": "allow_once", "allow": "allow_once", "ok": "allow_once",
               "always": "allow_always", "no": "deny", "deny": "deny"}
APPROVAL_BUTTONS = (("Allow once", "allow_once"), ("Always", "allow_always"),
                    ("Deny", "deny"))


def remember(kept: dict[str, Any], key: str, value: Any, most: int) -> None:
    """Keep `key` among the newest `most` entries of `kept` (an adapter's memory of what it
    sent or took in), the oldest let go: a gateway running for months holds no more."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > most:
        del kept[next(iter(kept))]


class OneAtATime:
    """A lock per key (an adapter's thread), kept only while someone holds it or waits for it:
    `async with locks.held(key)`. A gateway that answered in a million threads holds none."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # key → (lock, holders + waiters)

    @contextlib.asynccontextmanager
    async def held(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        lock = lock or asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            users = self._locks[key][1] - 1
            if users:
                self._locks[key] = (lock, users)
            else:
                del self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


class SendError(Exception):
    """A send that did not end in the channel's message id; the message says why."""


class NotSent(SendError):
    """The channel never took the message (it refused the connection, asked to wait): it may
    be sent again, after `retry_after` seconds if the channel said so."""

    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.retry_after = retry_after


class Refused(SendError):
    """The channel refused the message for good (a bad request, a blocked bot)."""


class Unsure(SendError):
    """The send may have reached the channel (a timeout after the request went out)."""


@dataclass(frozen=True)
class Outbound:
    """One message for a thread: a part of what the ledger owes, with its buttons."""

    delivery_id: int
    thread: str
    text: str
    kind: str  # reply | notice | approval | note
    part: int = 1
    parts: int = 1
    chat: str = ""  # the chat's key (for a channel that tells its app which chat answered)
    approval_id: str | None = None
    buttons: tuple[tuple[str, str], ...] = ()  # (label, decision) for an approval


@dataclass
class Health:
    """A channel's state, with the sentence that says it: starting | running | error."""

    state: str = "starting"
    sentence: str = "Starting."
    detail: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Sent:
    """A message the gateway sent on a channel, known by the channel's id for it: where it
    went, what it was (reply | notice | approval | note), and the approval it asked."""

    thread: str
    kind: str
    approval_id: str | None


@dataclass(frozen=True)
class Answering:
    """What a send may need to know of where it answers: the chat's title, and what the
    channel kept with the latest message the chat took in from the thread (`Inbound.kept`)."""

    title: str | None
    kept: dict[str, Any]


class Desk(Protocol):
    """What an adapter may ask of the gateway (the manager implements it)."""

    async def receive(self, inbound: Inbound) -> Received | None: ...

    async def answer(self, channel: str, approval_id: str, decision: str, sender: str,
                     owner: bool) -> str: ...

    async def skip(self, channel: str, cursor: int, token: str | None = None) -> None: ...

    async def cursor(self, channel: str) -> int | None: ...

    async def cursor_token(self, channel: str) -> tuple[int | None, str | None]: ...

    async def owner_dms(self, channel: str) -> list[str]:
        """The channel's threads linked as the owner's own direct chat, newest first."""

    async def sent_as(self, channel: str, message_id: str) -> Sent | None:
        """What the gateway sent that the channel knows by `message_id` (None: not ours)."""

    async def answering(self, channel: str, out: Outbound) -> Answering:
        """Where `out` answers: its chat's title, and what was kept with the thread."""


class Channel(Protocol):
    """A channel adapter."""

    name: str
    max_chars: int  # a message longer than this is split (never cut)
    measure: Callable[[str], int]  # how the channel counts a message's length
    resend_is_safe: bool  # the channel drops a message it already has, by its delivery id
    health: Health

    async def start(self, desk: Desk) -> None:
        """Begin taking messages in (return at once; work in tasks of its own)."""

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> str | None:
        """Send one message; the channel's id for it. Raises NotSent, Refused or Unsure."""

    async def typing(self, thread: str) -> None:
        """Show that an answer is being written (best effort; errors are swallowed)."""

    def owner_thread(self) -> str | None:
        """The owner's own direct chat on this channel (where "Continue on" moves a chat)."""
