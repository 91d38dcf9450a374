"""The streamed answer's checkpoint: text that arrived is on the run within about a second,
even when the model then pauses, and a burst of chunks is not a write per chunk."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from hearth.engine.turn.loop import CHECKPOINT_SECONDS
from hearth.store import runs as run_store
from tests.engine_harness import make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway


@pytest.mark.process_gateway  # a kill -9, then a restart
def test_text_before_a_pause_is_kept_when_the_gateway_is_killed_during_it(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """The model streams the first half of its answer, then stalls; the gateway is killed
    (SIGKILL) a little over a second into the stall. After the restart, the first half is in
    the chat, kept as a partial answer.

    Before: a checkpoint was written only when a later chunk arrived a second or more after
    the stream began, so text followed by a pause lived in memory alone; after the kill the run
    held no partial text and the chat had no partial answer (only the resumed one)."""
    reply = Reply(text="Before the pause, this. After it, that.", chunks=2, stall=10,
                  stall_after=1)
    shown = reply.text_pieces()[0]
    model_server.push(reply)
    api = gateway.client()
    key = api.new_chat()
    sent = api.send(key, "think it over")
    deltas = api.frames(key, after=sent["seq"], until=lambda f: f["type"] == "delta")
    assert deltas[-1]["type"] == "delta" and deltas[-1]["text"] == shown
    time.sleep(CHECKPOINT_SECONDS + 0.8)  # into the stall: no further chunk has come
    gateway.kill()
    model_server.reset()
    model_server.push(Reply(text="The whole answer."))
    gateway.start()
    api = gateway.client()
    assert api.wait(sent["run_id"])["status"] == "complete"
    messages = api.messages(key)
    partial = [m for m in messages if m["kind"] == "assistant" and m["meta"].get("partial")]
    assert [m["text"] for m in partial] == [shown], messages
    assert partial[0]["meta"].get("recovered") is True
    assert messages[-1]["text"] == "The whole answer."


def test_a_burst_of_chunks_is_checkpointed_about_once_a_second_not_per_chunk(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """60 chunks over about a second, then a pause of 4 s, then the end: during the pause the
    run holds every chunk that came before it, and the whole turn costs a handful of
    checkpoint writes (one a second at most), not one per chunk.

    Before: the chunks of the burst's last second stayed unwritten through the whole pause."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    text = "".join(f"w{i:02d} " for i in range(60))
    model_server.push(Reply(text=text, chunks=60, delay=0.02, stall=4.0, stall_after=60))
    writes: list[Any] = []

    def count(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE RUNS") and "partial_text" in statement:
            writes.append(params)

    event.listen(engine.db.engine, "before_cursor_execute", count)

    async def body() -> tuple[bool, dict[str, Any]]:
        await engine.start()
        try:
            key = new_chat(engine)
            running = asyncio.create_task(turn(engine, key, "talk fast"))
            kept_in_pause = False
            while not running.done() and not kept_in_pause:
                await asyncio.sleep(0.1)
                run = await engine.db.reading(run_store.current, key)
                kept_in_pause = run is not None and run.partial_text == text
            return kept_in_pause, await running
        finally:
            await engine.close()
            engine.db.close()

    kept_in_pause, view = asyncio.run(body())
    assert view["status"] == "complete"
    assert kept_in_pause, "the whole burst was never checkpointed while the model paused"
    assert 2 <= len(writes) <= 7, len(writes)
