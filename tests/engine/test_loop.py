"""The model/tool loop in-process: call order, parallelism, limits, endings."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from hearth.privacy.principal import OWNER
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome
from tests.engine_harness import (
    events,
    make_config,
    make_engine,
    new_chat,
    one_turn,
    run,
    turn,
)
from tests.fakes.model_server import Call, Reply, ScriptedModelServer


class Sleeper:
    """A read-only tool that sleeps for `seconds`, recording when it started and finished."""

    description = "Sleep, then answer."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "tag": {"type": "string"}},
        "required": ["seconds", "tag"],
    }
    effect: Effect = "reads"
    placed: Placed = "gateway"

    def __init__(self, name: str = "sleeper", parallel_safe: bool = True) -> None:
        self.name = name
        self.parallel_safe = parallel_safe
        self.log: list[tuple[str, str, float]] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        self.log.append(("start", args["tag"], time.monotonic()))
        await asyncio.sleep(args["seconds"])
        self.log.append(("end", args["tag"], time.monotonic()))
        return ToolOutcome(output=f"slept {args['tag']}", receipt=f"Slept {args['tag']}.")


def _calls(*specs: tuple[float, str]) -> list[Call]:
    return [Call("sleeper", {"seconds": s, "tag": t}, id=f"c_{t}") for s, t in specs]


def test_parallel_results_are_appended_in_call_order(tmp_path: Path,
                                                     model_server: ScriptedModelServer) -> None:
    tool = Sleeper()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [tool])
    model_server.push(Reply(tool_calls=_calls((0.6, "a"), (0.3, "b"), (0.0, "c"))),
                      Reply(text="done"))

    async def body() -> dict[str, Any]:
        await engine.start()
        key = new_chat(engine)
        view = await turn(engine, key, "go")
        view["events"] = events(engine, key)
        await engine.close()
        return view

    view = run(body())
    assert view["status"] == "complete"
    ends = [tag for kind, tag, _ in tool.log if kind == "end"]
    assert ends == ["c", "b", "a"]  # they finished out of order, so they ran in parallel
    starts = [stamp for kind, _, stamp in tool.log if kind == "start"]
    assert max(starts) - min(starts) < 0.2
    results = [e.content["call_id"] for e in view["events"] if e.kind == "tool_result"]
    assert results == ["c_a", "c_b", "c_c"]  # ...and were appended in the model's order
    sent = model_server.requests[1].messages
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["c_a", "c_b", "c_c"]


def test_a_batch_with_a_tool_that_forbids_parallel_runs_in_sequence(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    tool = Sleeper(parallel_safe=False)
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [tool])
    model_server.push(Reply(tool_calls=_calls((0.2, "a"), (0.0, "b"))), Reply(text="ok"))

    one_turn(engine, "go")
    assert [(k, t) for k, t, _ in tool.log] == [
        ("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]


def test_model_call_limit_ends_a_runaway_turn(tmp_path: Path,
                                              model_server: ScriptedModelServer) -> None:
    tool = Sleeper()
    config = make_config(model_server.openai_base_url,
                         limits={"max_model_calls_per_turn": 3})
    engine = make_engine(tmp_path, config, [tool])
    model_server.default = Reply(tool_calls=[Call("sleeper", {"seconds": 0, "tag": "x"})])

    view, rows = one_turn(engine, "loop forever")
    assert len(model_server.requests) == 3
    assert view["status"] == "error" and view["ending"] == "model_call_limit"
    assert "3 model calls" in view["sentence"]
    assert rows[-1].kind == "notice" and rows[-1].content["text"] == view["sentence"]


def test_tool_call_limit_refuses_the_batch_that_would_pass_it(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    tool = Sleeper()
    config = make_config(model_server.openai_base_url, limits={"max_tool_calls_per_turn": 3})
    engine = make_engine(tmp_path, config, [tool])
    model_server.push(Reply(tool_calls=_calls((0, "a"), (0, "b"))),
                      Reply(tool_calls=_calls((0, "c"), (0, "d"))))

    view, rows = one_turn(engine, "go")
    assert view["ending"] == "tool_call_limit" and "3 tool calls" in view["sentence"]
    assert [t for k, t, _ in tool.log if k == "start"] == ["a", "b"]  # c and d never ran
    refused = [e.content for e in rows if e.kind == "tool_result" and e.content["is_error"]]
    assert [r["call_id"] for r in refused] == ["c_c", "c_d"]
    assert len(view["tool_calls"]) == 2  # the ledger holds only what ran
    assert len(model_server.requests) == 2


def test_a_cut_off_stream_keeps_the_partial_and_says_so(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [Sleeper()])
    model_server.push(Reply(text="one two three four five six", chunks=6, cut_after=2))

    view, rows = one_turn(engine, "talk")
    assert view["status"] == "error" and view["ending"] == "cut_off"
    assert "cut off" in view["sentence"]
    partial = [e for e in rows if e.kind == "assistant"]
    assert len(partial) == 1
    assert partial[0].content["text"] and "one two three four five six".startswith(
        partial[0].content["text"])
    assert partial[0].content["text"] != "one two three four five six"
    assert partial[0].meta["partial"] is True
    assert partial[0].meta["finish_reason"] == "incomplete"
    assert rows[-1].kind == "notice"


def test_a_cut_off_tool_request_runs_nothing(tmp_path: Path,
                                             model_server: ScriptedModelServer) -> None:
    tool = Sleeper()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [tool])
    cut = Reply(tool_calls=_calls((0, "a"), (0, "b")), cut_after=2)
    model_server.push(cut, cut)

    view, _ = one_turn(engine, "go")
    assert len(model_server.requests) == 2  # nothing was shown, so it was asked once more
    assert view["ending"] == "cut_off"
    assert tool.log == [] and view["tool_calls"] == []


def test_unknown_tool_and_bad_arguments_answer_the_model(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    tool = Sleeper()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [tool])
    model_server.push(
        Reply(tool_calls=[Call("nope", {}, id="x1"), Call("sleeper", {"seconds": 1}, id="x2"),
                          Call("sleeper", "{not json", id="x3")]),
        Reply(text="sorry"),
    )

    view, _ = one_turn(engine, "go")
    assert view["status"] == "complete" and tool.log == []
    results = {m["tool_call_id"]: m["content"] for m in model_server.requests[1].messages
               if m["role"] == "tool"}
    assert "no tool named 'nope'" in results["x1"]
    assert "'tag' is required" in results["x2"]
    assert "not valid JSON" in results["x3"]


def test_an_empty_answer_is_resent_once_then_ends_with_a_sentence(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(text=""), Reply(text=""), Reply(text="late"))

    view, _ = one_turn(engine, "hello?")
    assert len(model_server.requests) == 2
    assert view["ending"] == "no_answer" and view["sentence"] == "The model wrote no answer."


def test_an_output_cap_with_no_answer_asks_once_for_brevity_then_names_the_cap(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    capped = Reply(text="", finish_reason="length")
    model_server.push(capped, capped)

    view, _ = one_turn(engine, "write a novel")
    assert len(model_server.requests) == 2
    note = model_server.requests[1].messages[-1]
    assert note["role"] == "system" and "briefly" in note["content"]
    assert len(model_server.requests[0].messages) == 2  # the note was on one request only
    assert view["ending"] == "output_cap" and "8,192 tokens" in view["sentence"]


def test_a_provider_error_ends_the_turn_with_its_status(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(status=500))

    view, _ = one_turn(engine, "hi")
    assert view["ending"] == "model_error" and "HTTP 500" in view["sentence"]
    assert "sk-test" not in view["sentence"]


def test_history_excludes_messages_queued_behind_the_run(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.push(Reply(text="first answer", delay=0.1), Reply(text="second answer"))

    async def body() -> None:
        await engine.start()
        key = new_chat(engine)
        first = await engine.send(key, "first question", principal=OWNER)
        second = await engine.send(key, "second question", principal=OWNER)
        assert second.status == "queued"
        await engine.bus.wait_run(first.run_id, 10)
        await engine.bus.wait_run(second.run_id, 10)
        await engine.close()

    run(body())
    one = [m["content"] for m in model_server.requests[0].messages if m["role"] != "system"]
    two = [m["content"] for m in model_server.requests[1].messages if m["role"] != "system"]
    assert one == ["first question"]
    assert two == ["first question", "first answer", "second question"]


def test_a_run_that_lost_its_writer_claim_cannot_write(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    import threading

    from hearth.store import sessions as session_store

    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="too late", hold=release, started=started))

    async def body() -> tuple[dict[str, Any], list[Any]]:
        await engine.start()
        key = new_chat(engine)
        admitted = await engine.send(key, "hi", principal=OWNER)
        assert await asyncio.to_thread(started.wait, 10)
        def intrude(conn: Connection) -> bool:  # another writer takes the chat
            session_store.release_writer(conn, key, admitted.run_id)
            return session_store.claim_writer(conn, key, "run_intruder")

        assert await engine.db.writing(intrude)
        release.set()
        await engine.bus.wait_run(admitted.run_id, 10)
        from hearth.engine.reads import queries
        view = await queries.run_status(engine.db, admitted.run_id)
        rows = events(engine, key)
        await engine.close()
        assert view is not None
        return view, rows

    view, rows = run(body())
    assert view["status"] == "error" and view["ending"] == "stale"
    assert [e.kind for e in rows] == ["user"]  # the answer was not written
