"""The relay: the live bus across replicas, over PostgreSQL's LISTEN/NOTIFY.

On PostgreSQL several gateways may serve one database, and a browser connected to one must
see the turn another runs, streamed words included. Every frame published on this gateway's
bus is sent to the others (`store/notify.py`: in order, a burst in one round trip), and every
frame another sent is handed to this bus's `heard`, so a stream here shows it as if the turn
ran here; what the store holds is replayed from the store as ever (a stream that reconnects
asks with `after=`). Besides frames, a replica may ask the others for something by name
(`tell`: "stop" a chat's turn, which only the replica running it can do); `ops` maps each
name to what this replica does when asked.

Hooks (`on_frame`) hear each frame that came from another replica after the bus has: the
engine wakes a lane waiting on a chat whose turn ended there, and an approval answered there
wakes the call waiting on it here. Frames are never kept: a replica that was not listening
misses them, and its streams are ended so their clients replay from the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from hearth.engine.delivery.events import Bus, Frame
from hearth.store.notify import Listener, Message, Notifier

log = logging.getLogger(__name__)

READY_SECONDS = 5.0  # how long a start waits for the listener to listen


class Relay:
    def __init__(self, bus: Bus, me: str, url: str) -> None:
        self._bus = bus
        self._me = me
        self._url = url
        self._notifier: Notifier | None = None
        self._listener: Listener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_frame: list[Callable[[str, Frame], None]] = []
        self.ops: dict[str, Callable[[str], object]] = {}

    async def start(self) -> None:
        """Listen, then relay what this bus publishes (call on the loop)."""
        self._loop = asyncio.get_running_loop()
        self._notifier = Notifier(self._url)
        self._listener = Listener(self._url, self._arrived, self._gap)
        if not await asyncio.to_thread(self._listener.ready.wait, READY_SECONDS):
            log.warning("not yet listening for the other replicas' events; trying on")
        self._bus.relay = self._send

    def tell(self, op: str, session_key: str) -> None:
        """Ask the other replicas to do `op` for a chat (the one that can, does)."""
        if self._notifier is not None:
            self._notifier.send({"r": self._me, "op": op, "k": session_key})

    async def close(self) -> None:
        self._bus.relay = None
        for part in (self._listener, self._notifier):
            if part is not None:
                await asyncio.to_thread(part.close)

    def _send(self, session_key: str, frame: Frame) -> None:
        assert self._notifier is not None
        self._notifier.send({"r": self._me, "k": session_key, "f": frame})

    def _arrived(self, message: Message) -> None:
        """On the listener's thread: handed to the loop."""
        if message.get("r") == self._me or self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._heard, message)
        except RuntimeError:  # the loop has closed: nobody listens any more
            pass

    def _heard(self, message: Message) -> None:
        key = str(message.get("k", ""))
        op = message.get("op")
        if op is not None:
            doer = self.ops.get(str(op))
            if doer is not None:
                doer(key)
            return
        frame: dict[str, Any] = dict(message["f"])
        self._bus.heard(key, frame)
        for hook in self.on_frame:
            hook(key, frame)

    def _gap(self) -> None:
        """On the listener's thread, after it listens again: frames were missed."""
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._bus.end_streams)
            except RuntimeError:
                pass
