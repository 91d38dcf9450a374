"""A chat's frames as Server-Sent Events: replay from the store after `after=SEQ`, then
live frames, for the API's stream (`web.api.events`) and the chat page's (`web.pages.chat`).

The stream subscribes to the bus before it reads the store, so nothing falls between the
replay and the live part; a persisted message is sent once (by seq), whichever way it came,
and so is the `done` of a run that ended after `after=` (by run id).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from hearth.engine.delivery.events import Subscription
from hearth.engine.runtime import Engine

KEEPALIVE_SECONDS = 15.0
REPLAY_PAGE = 500
MAX_SEQ = 2**62


def sse(frame: dict[str, Any]) -> str:
    head = f"id: {frame['seq']}\n" if frame.get("type") == "message" else ""
    return f"{head}data: {json.dumps(frame, separators=(',', ':'))}\n\n"


async def start_seq(engine: Engine, key: str, after: int | None,
                    last_event_id: str | None) -> int:
    """Where a stream starts: `after=`, else the browser's Last-Event-ID, else now."""
    session = await engine.reads.chat(key)
    if after is None and last_event_id is not None and last_event_id.isdigit():
        after = min(int(last_event_id), MAX_SEQ)
    return session.last_seq if after is None else after


Draw = Callable[[AsyncIterator[dict[str, Any]]], AsyncIterator[str]]


async def stream_response(engine: Engine, key: str, after: int | None,
                          last_event_id: str | None, draw: Draw | None = None
                          ) -> StreamingResponse:
    """A chat's frames as Server-Sent Events, each written by `draw` (plain JSON frames by
    default; the chat page adds the markup it draws)."""
    start = await start_seq(engine, key, after, last_event_id)
    subscription = engine.bus.subscribe(key)
    return StreamingResponse(
        (draw or _as_sse)(frames(engine, key, start, subscription)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                 "X-Hearth-Boot": engine.boot},
    )


async def _as_sse(source: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for frame in source:
        yield sse(frame)


async def frames(engine: Engine, key: str, last: int, sub: Subscription
                 ) -> AsyncIterator[dict[str, Any]]:
    """The chat's frames after seq `last`: the store's first (once each), then the bus's.

    The replay holds the `done` of every run that ended after `last`; a run that ends while
    it is read may be both in the store and on the bus, so the live part skips the `done` of
    a run the replay sent. After the replay, an `approval` frame for each approval still
    waiting (it may have been asked before the stream began: a page drawn just before it)."""
    replayed: set[str] = set()
    try:
        while True:
            page = await engine.reads.replay_page(key, last, REPLAY_PAGE)
            for frame in page.frames:
                yield frame
            last = page.last
            replayed |= page.ended
            if not page.more:
                break
        for view in await engine.reads.pending_approvals(key):  # asked before this stream
            yield {"type": "approval", "run_id": view["run_id"], "approval": view}
        status = await engine.reads.current_run(key)
        yield {"type": "status", "running": status is not None, "run_id": status,
               "boot": engine.boot}
        skip_below: dict[str, int] = {}
        streaming = engine.bus.streaming(key)
        if streaming is not None:
            run_id, text = streaming
            skip_below[run_id] = len(text)
            yield {"type": "delta", "run_id": run_id, "offset": 0, "text": text}
        async for frame in _live(sub):
            if frame["type"] == "message":
                if frame["seq"] <= last:
                    continue
                last = frame["seq"]
            elif frame["type"] == "delta" and frame["offset"] < skip_below.get(frame["run_id"], 0):
                continue
            elif frame["type"] == "done" and frame["run_id"] in replayed:
                continue
            yield frame
    finally:
        engine.bus.unsubscribe(sub)


async def _live(sub: Subscription) -> AsyncIterator[dict[str, Any]]:
    while True:
        try:
            frame = await asyncio.wait_for(sub.queue.get(), KEEPALIVE_SECONDS)
        except TimeoutError:
            yield {"type": "keepalive"}
            continue
        if frame is None:  # fell behind; the client reconnects with after=
            return
        yield frame
