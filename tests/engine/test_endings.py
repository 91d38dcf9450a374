"""The endings table, one test per row that the loop and the supervisor own: each way a turn
ends has one outcome and one sentence, and the retries each row allows happen at most once."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.privacy.principal import OWNER
from tests.engine_harness import blocking, events, make_config, make_engine, new_chat, one_turn, run
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.tools import Hook


def _view(engine: Engine, run_id: str) -> dict[str, Any]:
    view = blocking(lambda: queries.run_status(engine.db, run_id))
    assert view is not None
    return view


def test_tools_then_no_reply_is_asked_once_then_says_so(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [Hook("reads")])
    model_server.push(Reply(tool_calls=[Call("hook", {})]), Reply(text=""), Reply(text=""))
    view, rows = one_turn(engine, "do it")
    assert len(model_server.requests) == 3
    asked = model_server.requests[2].messages[-1]
    assert asked["role"] == "system" and "wrote no reply" in asked["content"]
    assert view["ending"] == "no_answer" and view["status"] == "error"
    assert view["sentence"] == "The agent ran 1 step but did not write an answer."
    assert rows[-1].kind == "notice" and rows[-1].content["text"] == view["sentence"]


def test_tools_then_a_reply_when_asked_completes(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [Hook("reads")])
    model_server.push(Reply(tool_calls=[Call("hook", {})]), Reply(text=""), Reply(text="Done."))
    view, rows = one_turn(engine, "do it")
    assert view["ending"] == "complete" and rows[-1].content["text"] == "Done."


def test_a_lost_connection_is_resent_until_the_provider_is_back(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.stop()
    timer = threading.Timer(1.0, model_server.start)
    timer.start()
    model_server.push(Reply(text="Back again."))
    view, rows = one_turn(engine, "hello?")
    timer.join()
    assert view["ending"] == "complete" and rows[-1].content["text"] == "Back again."
    assert len(model_server.requests) == 1


def test_a_lost_connection_is_resent_three_times_then_ends(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = make_config("http://127.0.0.1:9/v1")  # nothing listens there
    engine = make_engine(tmp_path, config, [])
    begun = time.monotonic()
    view, _ = one_turn(engine, "hello?")
    assert time.monotonic() - begun >= 3.0  # the backoff between the resends
    assert view["ending"] == "connection_lost"
    assert "sent 4 times" in view["sentence"] and "Send it again" in view["sentence"]


def test_a_lost_connection_after_a_change_is_not_resent(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    hook = Hook("changes", action=model_server.stop)  # the provider goes away mid-turn
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [hook])
    model_server.push(Reply(tool_calls=[Call("hook", {})]))
    view, _ = one_turn(engine, "change something")
    assert hook.calls == 1
    assert view["ending"] == "connection_lost"
    assert "after 1 step" in view["sentence"] and "not sent again" in view["sentence"]


def test_a_stop_ends_the_stream_at_once_and_frees_the_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(text="one two three four", chunks=4, delay=0.3, stall=30,
                            stall_after=1),  # a first word streams, then the model stalls
                      Reply(text="next answer"))

    async def body() -> tuple[dict[str, Any], dict[str, Any], list[Any], float]:
        await engine.start()
        key = new_chat(engine)
        first = await engine.send(key, "talk slowly", principal=OWNER)
        queued = await engine.send(key, "and then this", principal=OWNER)
        while not engine.bus.streaming(key):
            await asyncio.sleep(0.02)
        begun = time.monotonic()
        assert await engine.stop(key) == first.run_id
        await engine.bus.wait_run(first.run_id, 5)
        took = time.monotonic() - begun
        await engine.bus.wait_run(queued.run_id, 10)
        views = _view(engine, first.run_id), _view(engine, queued.run_id)
        rows = events(engine, key)
        await engine.close()
        return views[0], views[1], rows, took

    stopped, after, rows, took = run(body())
    assert took < 2.5  # at once: not the 30 s the stream would still have stalled
    assert stopped["status"] == "stopped" and stopped["ending"] == "stopped"
    assert stopped["sentence"] == "You stopped this turn."
    partial = [e for e in rows if e.kind == "assistant" and e.meta.get("partial")]
    assert len(partial) == 1 and partial[0].content["text"].startswith("one")
    assert after["status"] == "complete"  # the chat took the next message


def test_stop_ends_a_running_tool_and_marks_it_unknown(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "sleep 30; touch late"})]))

    async def body() -> tuple[dict[str, Any], list[Any]]:
        await engine.start()
        key = new_chat(engine)
        first = await engine.send(key, "wait a while", principal=OWNER)
        await asyncio.sleep(1.0)
        await engine.stop(key)
        await engine.bus.wait_run(first.run_id, 5)
        view, rows = _view(engine, first.run_id), events(engine, key)
        await engine.close()
        return view, rows

    view, rows = run(body())
    assert view["status"] == "stopped"
    assert [c["status"] for c in view["tool_calls"]] == ["unknown"]
    result = [e for e in rows if e.kind == "tool_result"]
    assert len(result) == 1 and "may or may not have taken effect" in result[0].content["output"]
    time.sleep(0.2)
    assert not (tmp_path / "workspace" / "late").exists()


def test_an_unattended_turn_with_no_progress_is_stopped(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = make_config(model_server.openai_base_url, limits={"unattended_idle_seconds": 1})
    engine = make_engine(tmp_path, config, [])
    release = threading.Event()
    model_server.default = Reply(text="late", hold=release)

    async def body() -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
        await engine.start()
        job_chat, typed_chat = new_chat(engine), new_chat(engine)
        job = await engine.send(job_chat, "nightly report", kind="job", principal=OWNER)
        typed = await engine.send(typed_chat, "a message I typed", principal=OWNER)
        await engine.bus.wait_run(job.run_id, 10)
        job_view = _view(engine, job.run_id)
        typed_view = _view(engine, typed.run_id)  # a typed message has no such limit
        release.set()
        await engine.bus.wait_run(typed.run_id, 10)
        rows = events(engine, job_chat)
        await engine.close()
        return job_view, typed_view, rows

    job, typed_while, rows = run(body())
    assert job["ending"] == "no_progress" and job["status"] == "error"
    assert "with no progress, 0 steps in" in job["sentence"]
    assert typed_while["status"] == "running"
    assert not [e for e in rows if e.kind == "assistant"]  # the late answer is dropped


def test_the_idle_clock_stands_still_while_a_call_runs(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = make_config(model_server.openai_base_url, limits={"unattended_idle_seconds": 1})
    engine = make_engine(tmp_path, config, [Hook("reads", seconds=2.0)])
    model_server.push(Reply(tool_calls=[Call("hook", {})]), Reply(text="Report done."))

    async def body() -> dict[str, Any]:
        await engine.start()
        job = await engine.send(new_chat(engine), "nightly report", kind="job", principal=OWNER)
        await engine.bus.wait_run(job.run_id, 10)
        view = _view(engine, job.run_id)
        await engine.close()
        return view

    assert run(body())["ending"] == "complete"


def test_the_turn_time_limit_stops_a_turn_and_drops_its_late_answer(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = make_config(model_server.openai_base_url, limits={"turn_timeout_seconds": 1})
    engine = make_engine(tmp_path, config, [])
    release = threading.Event()
    model_server.push(Reply(text="far too late", hold=release))
    view, rows = one_turn(engine, "take your time")
    release.set()
    assert view["ending"] == "time_limit" and view["status"] == "error"
    assert "time limit (1 s)" in view["sentence"]
    assert not [e for e in rows if e.kind == "assistant"]


def test_a_stopping_engine_admits_nothing(tmp_path: Path,
                                          model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])

    async def body() -> Refusal | None:
        await engine.start()
        key = new_chat(engine)
        engine.stop_admitting()
        try:
            await engine.send(key, "too late", principal=OWNER)
        except Refusal as refusal:
            return refusal
        finally:
            await engine.close()
        return None

    refusal = run(body())
    assert refusal is not None and refusal.status == 503 and refusal.code == "shutting_down"
