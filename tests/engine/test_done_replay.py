"""A late subscriber learns the ending: a stream reconnecting with `after=N` replays, from the
store, the `done` of every run of the chat that ended after seq N, once and in order, and the
live part never sends one of those again.

The stream under test is `hearth.web.http.stream.frames`, the one both the API's
`/api/sessions/{key}/events` and the chat page's `/chats/{key}/stream` send, driven in-process
on an engine with the scripted model server.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from hearth.engine.intake import admission
from hearth.engine.runtime import Engine
from hearth.engine.turn import endings
from hearth.privacy.principal import OWNER
from hearth.web.http.stream import frames
from tests.engine_harness import events, make_config, make_engine, new_chat, run, turn
from tests.fakes.model_server import Reply, ScriptedModelServer

Frame = dict[str, Any]


async def replay(engine: Engine, key: str, after: int, quiet: float = 0.3) -> list[Frame]:
    """What a stream subscribing now with after= sends: its replay and status, then whatever
    the live part sends within `quiet` seconds (nothing, for a chat at rest)."""
    stream = frames(engine, key, after, engine.bus.subscribe(key))
    got: list[Frame] = []
    try:
        async for frame in stream:
            got.append(frame)
            if frame["type"] == "status":
                break
        while True:
            try:
                got.append(await asyncio.wait_for(anext(stream), quiet))
            except TimeoutError:
                return got
    finally:
        await stream.aclose()


def dones(got: list[Frame]) -> list[Frame]:
    return [f for f in got if f["type"] == "done"]


def shape(got: list[Frame]) -> list[str]:
    """The replay's order: message seqs and done run ids."""
    return [f"m{f['seq']}" if f["type"] == "message" else f"done:{f['run_id']}"
            for f in got if f["type"] in ("message", "done")]


def test_a_subscriber_after_the_run_ended_gets_its_done_once(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: the `done` frame was live-only; a client subscribing with after=<the user
    message's seq> once the run had ended got the answer's message and a status saying
    nothing runs, and no word of how the run ended (no done frame at all)."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(text="The answer."))

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            view = await turn(engine, key, "hello")
            user, answer = events(engine, key)
            got = await replay(engine, key, after=user.seq)
            assert shape(got) == [f"m{answer.seq}", f"done:{view['run_id']}"]
            assert dones(got) == [{"type": "done", "run_id": view["run_id"],
                                   "outcome": "complete", "ending": "complete",
                                   "sentence": "The agent answered.",
                                   "answer_seq": answer.seq, "answer": "The answer."}]
            # A client that has seen the run's last message has seen its end: nothing again.
            assert dones(await replay(engine, key, after=answer.seq)) == []
        finally:
            await engine.close()

    run(body())


def test_an_ending_with_a_notice_replays_its_done_after_the_notice(tmp_path: Path) -> None:
    """An ending that writes a notice (here: no model configured) ends at the notice's seq,
    so a client that saw the notice is not told again and one that did not gets both, the
    notice first, as live. Before: no done frame was replayed for it at all."""
    engine = make_engine(tmp_path, make_config(None), [])

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            view = await turn(engine, key, "hello")
            user, notice = events(engine, key)
            assert notice.kind == "notice"
            got = await replay(engine, key, after=user.seq)
            assert shape(got) == [f"m{notice.seq}", f"done:{view['run_id']}"]
            (done,) = dones(got)
            assert (done["outcome"], done["ending"]) == ("error", "no_model")
            assert done["sentence"] == notice.content["text"] == view["sentence"]
            assert dones(await replay(engine, key, after=notice.seq)) == []
        finally:
            await engine.close()

    run(body())


def test_every_run_ended_since_is_replayed_in_order_and_none_before(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Three turns; a client that saw the first one whole gets the second and third runs'
    done frames, each right after its own answer, and not the first's. Before: none."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(text="one"), Reply(text="two"), Reply(text="three"))

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            runs = [(await turn(engine, key, word))["run_id"] for word in ("1", "2", "3")]
            seqs = [e.seq for e in events(engine, key)]  # 1..6: user, answer, ...
            got = await replay(engine, key, after=seqs[1])
            assert shape(got) == [f"m{seqs[2]}", f"m{seqs[3]}", f"done:{runs[1]}",
                                  f"m{seqs[4]}", f"m{seqs[5]}", f"done:{runs[2]}"]
            assert shape(await replay(engine, key, after=0))[:3] == [
                f"m{seqs[0]}", f"m{seqs[1]}", f"done:{runs[0]}"]
        finally:
            await engine.close()

    run(body())


def test_a_run_ending_while_the_replay_is_read_is_sent_once(tmp_path: Path) -> None:
    """The stream subscribes before it reads the store, so a run that ends in between is both
    on the bus (live) and in the store (replay). Its done is sent once: the live part skips a
    run the replay already ended. (The old code sent it once too, live only; a replay that
    did not skip would send it twice.)"""
    engine = make_engine(tmp_path, make_config(None), [])

    async def body() -> None:
        key = new_chat(engine)
        admitted = await admission.admit(engine.db, engine.bus, key, "hello",
                                         principal=OWNER)  # no lane runs it
        sub = engine.bus.subscribe(key)  # what stream_response does before the first read
        assert await endings.settle(engine.db, engine.bus, session_key=key,
                              run_id=admitted.run_id, ending=endings.stopped())
        assert sub.queue.qsize() == 2  # the notice and the done, live
        stream = frames(engine, key, 0, sub)
        got: list[Frame] = []
        try:
            while True:
                try:
                    got.append(await asyncio.wait_for(anext(stream), 0.3))
                except TimeoutError:
                    break
        finally:
            await stream.aclose()
        assert [(f["type"], f.get("ending")) for f in got] == [
            ("message", None), ("message", None), ("done", "stopped"), ("status", None)]

    run(body())


def test_a_reconnect_mid_turn_gets_the_live_done_once(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """A client reconnecting while the run still waits on the model gets no replayed done
    (the run has not ended) and then exactly one live done when it ends."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="late answer", hold=release, started=started))

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            admitted = await engine.send(key, "hello", principal=OWNER)
            await asyncio.to_thread(started.wait, 10)
            stream = frames(engine, key, 0, engine.bus.subscribe(key))
            got: list[Frame] = []
            try:
                async for frame in stream:
                    got.append(frame)
                    if frame["type"] == "status":
                        assert frame["running"] and dones(got) == []
                        release.set()
                        break
                while True:
                    try:
                        got.append(await asyncio.wait_for(anext(stream), 1.0))
                    except TimeoutError:
                        break
            finally:
                await stream.aclose()
            assert [d["run_id"] for d in dones(got)] == [admitted.run_id]
            assert dones(got)[0]["ending"] == "complete"
        finally:
            release.set()
            await engine.close()

    run(body())
