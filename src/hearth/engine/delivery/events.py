"""The live event bus: projects what the engine does to whoever is watching.

It never writes the transcript. Frames are dicts with a `type`: `message` (a persisted event,
with its `seq`), `delta` (streamed text of a run, with its `offset`), `status`, `done`. A
subscriber that falls behind by more than its queue holds is dropped and reconnects with
`after=` to replay from the store (the `done` of a run included: `done_frame` is one shape,
live or replayed).

A `done` carries the run's answer (`answer_seq`, `answer`: the seq and text of its last
assistant message, null when it wrote none), so a client draws the end from it alone. Live,
the bus fills them in from the answer messages it published for the run, held only until the
run's `done` (nothing of a restricted chat outlives its turn here); replayed, the store's
reader does (`engine.reads.queries`).

On PostgreSQL's replicas the bus reaches every gateway: what is published here is handed to
`relay` too (`engine/delivery/relay.py`, which sends it over LISTEN/NOTIFY), and what another
gateway published arrives through `heard`, published here as it would be locally (its streamed
text remembered, its `done` ending the stream and waking `/wait`), and never relayed again.

The bus is published to only on the event loop: its queues and events are asyncio's, which
are not thread-safe. A publish from a worker thread raises `PublishedOffLoop`; do the store
work in the thread and publish after returning to the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hearth.engine.views import message_view
from hearth.store.transcript import EventRow

Frame = dict[str, Any]
QUEUE_SIZE = 10_000


class PublishedOffLoop(RuntimeError):
    """The bus was published to from a thread that runs no event loop."""


async def until(event: asyncio.Event, timeout: float) -> bool:
    """Wait for `event` at most `timeout` seconds; whether it was set."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True


def _on_the_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise PublishedOffLoop(
            f"Bus.{what} was called off the event loop (in thread "
            f"{threading.current_thread().name!r}); asyncio queues are not thread-safe, so "
            "do the store work in the thread and publish after returning to the loop."
        ) from None


def message_frame(event: EventRow) -> Frame:
    """A persisted event, with its seq: one shape live and replayed."""
    return {"type": "message", "seq": event.seq, "run_id": event.run_id,
            "message": message_view(event)}


Answer = tuple[int, str]  # a run's answer as a `done` carries it: its seq and text


def done_frame(run_id: str, outcome: str, ending: str, sentence: str,
               answer: Answer | None = None) -> Frame:
    """A run's end: the same fields whether published live or replayed from the store (the
    answer's seq and text are null when it wrote none)."""
    seq, text = answer if answer is not None else (None, None)
    return {"type": "done", "run_id": run_id, "outcome": outcome, "ending": ending,
            "sentence": sentence, "answer_seq": seq, "answer": text}


def answer_in(frame: Frame) -> Answer | None:
    """The answer a `message` frame holds: its seq and text when it is an assistant's
    message of a run, else None."""
    message = frame.get("message")
    if frame.get("run_id") is None or not isinstance(message, dict):
        return None
    if message.get("kind") != "assistant":
        return None
    return int(frame["seq"]), str(message.get("text", ""))


@dataclass(eq=False)
class Subscription:
    session_key: str
    queue: asyncio.Queue[Frame | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE)
    )
    dropped: bool = False


class Bus:
    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = defaultdict(set)
        self._streaming: dict[str, tuple[str, str]] = {}  # session -> (run_id, text so far)
        self._run_ended: dict[str, asyncio.Event] = {}
        self._waiters: dict[str, int] = defaultdict(int)  # run -> how many wait_run await it
        self._taps: list[Callable[[str, Frame], None]] = []
        self._own_taps: list[Callable[[str, Frame], None]] = []  # this gateway's frames alone
        self._answers: dict[str, tuple[str, Answer]] = {}  # chat -> (run, its answer so far)
        self.relay: Callable[[str, Frame], None] | None = None  # to the other replicas

    def tap(self, listener: Callable[[str, Frame], None]) -> None:
        """Hear every frame of every chat, on the loop, as it is published (the channels'
        delivery hears what a linked chat says this way). `listener` must return at once."""
        self._taps.append(listener)

    def tap_own(self, listener: Callable[[str, Frame], None]) -> None:
        """Hear every frame this gateway publishes, never one `heard` from another replica
        (the metrics count this gateway's endings so). `listener` must return at once."""
        self._own_taps.append(listener)

    def subscribe(self, session_key: str) -> Subscription:
        sub = Subscription(session_key)
        self._subs[session_key].add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.session_key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.session_key]

    def publish(self, session_key: str, frame: Frame) -> None:
        _on_the_loop("publish")
        frame = self._noted(session_key, frame)
        if self.relay is not None:
            self.relay(session_key, frame)
        for listener in self._own_taps:
            listener(session_key, frame)
        self._hand_on(session_key, frame)

    def heard(self, session_key: str, frame: Frame) -> None:
        """A frame another replica published (its turn runs there): published here as it
        was there, and not relayed back."""
        _on_the_loop("heard")
        kind = frame.get("type")
        if kind == "delta":
            run_id, so_far = self._streaming.get(session_key, (frame["run_id"], ""))
            if run_id != frame["run_id"]:
                so_far = ""
            self._streaming[session_key] = (
                str(frame["run_id"]), so_far[:int(frame["offset"])] + str(frame["text"]))
        elif kind == "done":
            self.end_stream(session_key)
        self._hand_on(session_key, frame)
        if kind == "done":
            self.run_ended(str(frame["run_id"]))

    def _hand_on(self, session_key: str, frame: Frame) -> None:
        for listener in self._taps:
            listener(session_key, frame)
        for sub in list(self._subs.get(session_key, ())):
            try:
                sub.queue.put_nowait(frame)
            except asyncio.QueueFull:
                sub.dropped = True
                self.unsubscribe(sub)
                sub.queue.get_nowait()
                sub.queue.put_nowait(None)  # tells the reader to end; the client replays

    def _noted(self, session_key: str, frame: Frame) -> Frame:
        """Remember a run's answer as it is published (one per chat: a chat runs one turn at
        a time); hand it to the run's `done` (filled in when the ending did not carry one)
        and forget it there."""
        kind = frame.get("type")
        if kind == "message":
            answer = answer_in(frame)
            if answer is not None:
                self._answers[session_key] = (str(frame["run_id"]), answer)
        elif kind == "done":
            run_id, answer = self._answers.get(session_key, ("", None))
            if run_id == frame.get("run_id"):
                del self._answers[session_key]
                if answer is not None and frame.get("answer_seq") is None:
                    return {**frame, "answer_seq": answer[0], "answer": answer[1]}
        return frame

    def close(self) -> None:
        """End every live stream (the gateway is stopping); clients reconnect with after=."""
        self._answers.clear()
        self.end_streams()

    def end_streams(self) -> None:
        """End every live stream now; each client reconnects with `after=` and replays from
        the store what it missed (the other replicas' frames were lost for a while)."""
        for subs in list(self._subs.values()):
            for sub in list(subs):
                self.unsubscribe(sub)
                if sub.queue.full():
                    sub.queue.get_nowait()
                sub.queue.put_nowait(None)

    def delta(self, session_key: str, run_id: str, text: str) -> None:
        """Publish streamed text, remembering the run's text so far for late subscribers."""
        current_run, so_far = self._streaming.get(session_key, (run_id, ""))
        if current_run != run_id:
            so_far = ""
        self._streaming[session_key] = (run_id, so_far + text)
        self.publish(
            session_key, {"type": "delta", "run_id": run_id, "offset": len(so_far), "text": text}
        )

    def streaming(self, session_key: str) -> tuple[str, str] | None:
        return self._streaming.get(session_key)

    def end_stream(self, session_key: str) -> None:
        self._streaming.pop(session_key, None)

    def run_ended(self, run_id: str) -> None:
        _on_the_loop("run_ended")
        self._run_ended.pop(run_id, asyncio.Event()).set()

    async def wait_run(self, run_id: str, timeout: float) -> None:
        """Until the run ends, or `timeout` seconds. Call it right after seeing the run admitted
        or running, with no await in between: the end of a run is not remembered, so a run that
        ended before the call is waited on for the whole timeout (`watching` has no such gap)."""
        with self.watching(run_id) as ended:
            await until(ended, timeout)

    @contextmanager
    def watching(self, run_id: str) -> Iterator[asyncio.Event]:
        """The event set when the run ends, heard from now on: a caller that watches first and
        reads the run's state after cannot miss an end between the two. The last watcher to
        leave takes the run's event away, so a run watched and never ended here leaves nothing
        behind."""
        event = self._run_ended.setdefault(run_id, asyncio.Event())
        self._waiters[run_id] += 1
        try:
            yield event
        finally:
            self._waiters[run_id] -= 1
            if not self._waiters[run_id]:
                del self._waiters[run_id]
                if self._run_ended.get(run_id) is event:
                    del self._run_ended[run_id]
