"""PostgreSQL's LISTEN/NOTIFY, as the replicas use it: one channel, messages in order.

`Notifier` sends: a thread with a connection of its own takes what `send` queued and sends all
of it in one transaction (`pg_notify`, one per message), so a burst of streamed words costs
one round trip, and a replica's messages reach the others in the order they were sent. A
message longer than one notification may carry (8000 bytes) is sent in parts, reassembled by
`Listener` before it is handed on.

`Listener` hears: a thread holding a connection that LISTENs, handing each whole message to
`deliver` (which must return at once; the relay hands it to the event loop). A lost
connection is made again with a pause between tries; `on_gap` is told, since what was sent
meanwhile was not heard (the relay ends the live streams, which replay from the store).

Nothing here is kept: a notification lives in PostgreSQL's queue until every listener has
read it (see docs/postgres.md on what that queue may hold of a chat).
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import make_url

from hearth.threads import start_daemon

log = logging.getLogger(__name__)

CHANNEL = "hearth_events"
PART_CHARS = 3000  # of a message's JSON per notification: its UTF-8 fits in 8000 bytes
RETRY_SECONDS = 1.0
Message = dict[str, Any]


def conninfo(url: str) -> str:
    """psycopg's connection string for a SQLAlchemy URL (`postgresql+psycopg://…`)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def parts(message: Message, ids: itertools.count[int]) -> list[str]:
    """The notifications that carry `message`: itself, or its JSON in numbered parts."""
    whole = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    if len(whole) <= PART_CHARS:
        return [whole]
    pieces = [whole[i:i + PART_CHARS] for i in range(0, len(whole), PART_CHARS)]
    key = f"{message.get('r', '')}:{next(ids)}"
    return [json.dumps({"part": key, "i": i, "n": len(pieces), "d": piece},
                       separators=(",", ":"), ensure_ascii=False)
            for i, piece in enumerate(pieces)]


class Notifier:
    """Sends messages on `CHANNEL` from a thread of its own (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._conninfo = conninfo(url)
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._thread = start_daemon(self._run, "hearth-notify")

    def send(self, message: Message) -> None:
        """Queue `message` (from any thread; never blocks)."""
        for part in parts(message, self._ids):
            self._queue.put(part)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        conn: psycopg.Connection[Any] | None = None
        while True:
            batch = self._take()
            if batch is None:
                break
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._conninfo, autocommit=True)
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany("SELECT pg_notify(%s, %s)",
                                       [(CHANNEL, part) for part in batch])
            except psycopg.Error as error:
                log.warning("could not tell the other replicas (%s); %d frame(s) lost, their "
                            "streams replay from the store", type(error).__name__, len(batch))
                conn = None
                time.sleep(RETRY_SECONDS)
        if conn is not None:
            conn.close()

    def _take(self) -> list[str] | None:
        """The next message and every one queued behind it (None: closing)."""
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < 500:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._queue.put(None)
                break
            batch.append(more)
        return batch


class Listener:
    """Hears `CHANNEL` on a thread of its own (see the module docstring)."""

    def __init__(self, url: str, deliver: Callable[[Message], None],
                 on_gap: Callable[[], None]) -> None:
        self._conninfo = conninfo(url)
        self._deliver = deliver
        self._on_gap = on_gap
        self._parts: dict[str, list[str]] = {}
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once it listens (the first time)
        self._thread = start_daemon(self._run, "hearth-listen")

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        heard_before = False
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if heard_before:
                        self._on_gap()
                    heard_before = True
                    self.ready.set()
                    self._hear(conn)
            except psycopg.Error as error:
                log.warning("lost the other replicas' events (%s); listening again",
                            type(error).__name__)
                self._stopping.wait(RETRY_SECONDS)

    def _hear(self, conn: Any) -> None:
        while not self._stopping.is_set():
            for note in conn.notifies(timeout=0.5):
                message = self._whole(note.payload)
                if message is not None:
                    self._deliver(message)

    def _whole(self, payload: str) -> Message | None:
        """The message a notification completes (None: a part still waiting for others)."""
        said = json.loads(payload)
        if "part" not in said:
            return dict(said)
        held = self._parts.setdefault(str(said["part"]), [])
        held.append(str(said["d"]))
        if len(held) < int(said["n"]):
            return None
        del self._parts[str(said["part"])]
        return dict(json.loads("".join(held)))
