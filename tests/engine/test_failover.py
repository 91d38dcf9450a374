"""Failover, resolution order and the output cap, on the scripted server: a turn whose model
fails before anything was shown moves to the next model (each once, tools respected), never
after text was shown or a step that may have changed something; the chat's pick and the
agent's pin come before the chain, and one that cannot run is kept and said."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hearth.config import Config
from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.sessions import chats
from hearth.store.transcript import EventRow
from tests.engine_harness import blocking, events, make_engine, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.tools import Hook


def _config(url: str, chain: list[str] | None = None, **extra: Any) -> Config:
    """Models a, b, c on the one scripted server (wire names ma, mb, mc); the chat chain.
    Chores run on a model of their own (bg), so that their calls, which share the breakers,
    never open or close a breaker under test between two turns."""
    models = [{"id": m, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"m{m}"} for m in ("a", "b", "c", "bg")]
    for model in models:
        model.update(extra.pop(f"model_{model['id']}", {}))
    models += extra.pop("more_models", [])
    raw: dict[str, Any] = {"tools": {"profile": "full"}, "models": models,
                           "chains": {"chat": chain or ["a", "b", "c"], "background": ["bg"]},
                           **extra}
    return Config.model_validate(raw)


def _turns(engine: Engine, texts: list[str], **chat: Any) -> list[tuple[dict[str, Any],
                                                                          list[EventRow]]]:
    """Run each message in one new chat (opened with `chat`), in order."""

    async def body() -> list[tuple[dict[str, Any], list[EventRow]]]:
        await engine.start()
        try:
            opened = await chats.open_chat(engine.db, trust="trusted", **chat)
            key = opened.session.key
            done = []
            for text in texts:
                view = await turn(engine, key, text)
                done.append((view, events(engine, key)))
            return done
        finally:
            await engine.close()

    result: list[tuple[dict[str, Any], list[EventRow]]] = asyncio.run(body())
    return result


def _answer(rows: list[EventRow]) -> EventRow:
    return [r for r in rows if r.kind == "assistant"][-1]


def _models_called(server: ScriptedModelServer) -> list[str]:
    """The turns' calls, by wire model (the chores' are the server's `chore_requests`)."""
    return [r.model for r in server.requests if r.model]


def test_a_503_before_anything_was_shown_moves_to_the_next_model_and_says_so(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(status=503), model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and view["model"] == "b"
    assert _models_called(model_server) == ["ma", "mb"]
    answer = _answer(rows)
    assert answer.content["text"] == "From b."
    assert answer.meta["failover"] == "Answered by b: a failed (HTTP 503)."
    telemetry = answer.meta["turn_telemetry"]
    assert telemetry["model_id"] == "b" and "after a failed (HTTP 503)" in telemetry["chosen_by"]


def test_a_first_byte_later_than_the_models_timeout_moves_on(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    import threading

    never = threading.Event()  # released when the server stops
    config = _config(model_server.openai_base_url, model_a={"timeout_seconds": 1})
    engine = make_engine(tmp_path, config, [])
    model_server.push(Reply(text="late", hold=never), Reply(text="late", hold=never),
                      model="ma")
    model_server.push(Reply(text="From b, on time."), model="mb")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and view["model"] == "b"
    assert _answer(rows).content["text"] == "From b, on time."
    assert _answer(rows).meta["failover"].startswith("Answered by b: a failed")


def test_a_restricted_chat_never_moves_to_another_model(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(status=503), model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, rows)] = _turns(engine, ["a private question"], memory_mode="incognito")
    assert _models_called(model_server) == ["ma"]  # nothing of it reached b (invariant 8)
    assert view["ending"] == "model_error" and "503" in view["sentence"]
    assert not [r for r in rows if r.kind == "assistant"]


def test_a_500_and_a_refused_connection_each_move_on(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    dead = "http://127.0.0.1:9/v1"  # nothing listens there: connection refused
    engine = make_engine(tmp_path, _config(model_server.openai_base_url,
                                           model_a={"base_url": dead}), [])
    model_server.push(Reply(status=500), model="mb")
    model_server.push(Reply(text="From c."), model="mc")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and view["model"] == "c"
    assert _models_called(model_server) == ["mb", "mc"]  # a never reached the server
    assert _answer(rows).meta["failover"] == (
        "Answered by c: a failed (unreachable); b failed (HTTP 500).")


def test_a_429_with_a_short_retry_after_is_waited_for_once_then_moves_on(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(status=429, retry_after="1"), Reply(status=429, retry_after="1"),
                      model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and view["model"] == "b"
    assert _models_called(model_server) == ["ma", "ma", "mb"]  # waited once, then moved
    assert _answer(rows).meta["failover"] == "Answered by b: a failed (HTTP 429)."


def test_a_429_asking_for_a_long_wait_moves_on_at_once(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(status=429, retry_after="3600"), model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, _)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and _models_called(model_server) == ["ma", "mb"]


def test_no_failover_after_text_was_shown(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(text="Half an answer that goes on", cut_after=1), model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "cut_off" and view["model"] == "a"
    assert _models_called(model_server) == ["ma"]
    assert _answer(rows).meta["partial"] is True


def test_no_failover_after_a_step_that_may_have_changed_something(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    hook = Hook("changes")
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [hook])
    model_server.push(Reply(tool_calls=[Call("hook", {})]), Reply(status=503), model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, _)] = _turns(engine, ["do it"])
    assert view["ending"] == "model_error"
    assert "the step “hook” may have changed something" in view["sentence"]
    assert _models_called(model_server) == ["ma", "ma"] and hook.calls == 1


def test_failover_after_a_read_step_carries_its_result_and_runs_nothing_twice(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    hook = Hook("reads")
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [hook])
    model_server.push(Reply(tool_calls=[Call("hook", {}, id="call_r")]), Reply(status=503),
                      model="ma")
    model_server.push(Reply(text="From b."), model="mb")
    [(view, _)] = _turns(engine, ["look"])
    assert view["ending"] == "complete" and hook.calls == 1
    sent = model_server.requests[-1].messages
    assert [m["role"] for m in sent[-2:]] == ["assistant", "tool"]  # b read a's step
    assert sent[-1]["tool_call_id"] == "call_r"


def test_every_model_failing_names_each_and_the_next_turn_starts_on_the_first(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(status=503), Reply(text="a is back."), model="ma")
    model_server.push(Reply(status=500), model="mb")
    model_server.push(Reply(status=429, retry_after=None), model="mc")
    (first, _), (second, _) = _turns(engine, ["one", "two"])
    assert first["ending"] == "model_error"
    assert first["sentence"] == ("No model could answer: a failed (HTTP 503); b failed "
                                 "(HTTP 500); c failed (HTTP 429). Send the message again "
                                 "to retry.")
    assert second["ending"] == "complete" and second["model"] == "a"
    assert _models_called(model_server) == ["ma", "mb", "mc", "ma"]


def test_a_model_without_tools_is_skipped_when_the_turn_offers_them(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url,
                                           model_b={"tools": False}), [Hook("reads")])
    model_server.push(Reply(status=503), model="ma")
    model_server.push(Reply(text="From c."), model="mc")
    [(view, rows)] = _turns(engine, ["hello"])
    assert view["ending"] == "complete" and view["model"] == "c"
    assert _models_called(model_server) == ["ma", "mc"]
    assert _answer(rows).meta["failover"] == (
        "Answered by c: a failed (HTTP 503); b: it cannot use tools.")


def test_the_chat_pick_comes_before_the_agent_pin_before_the_chain(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _config(model_server.openai_base_url, agents={"researcher": {"model": "b"}})
    model_server.push(Reply(status=503), model="mc")  # the pick fails: the pin answers
    model_server.push(Reply(text="From b."), model="mb")
    [(view, rows)] = _turns(make_engine(tmp_path, config, []), ["hi"], model="c",
                            agent="researcher")
    assert _models_called(model_server) == ["mc", "mb"]
    assert view["model"] == "b"
    chosen = _answer(rows).meta["turn_telemetry"]["chosen_by"]
    assert chosen.startswith("the researcher agent's own model")


def test_the_agent_pin_comes_before_the_chain(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _config(model_server.openai_base_url, agents={"researcher": {"model": "c"}})
    model_server.push(Reply(text="From c."), model="mc")
    [(view, rows)] = _turns(make_engine(tmp_path, config, []), ["hi"], agent="researcher")
    assert view["model"] == "c" and _models_called(model_server) == ["mc"]
    assert _answer(rows).meta["turn_telemetry"]["chosen_by"] == (
        "the researcher agent's own model")


def test_a_pick_that_cannot_run_is_kept_and_the_substitution_said(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    nokey = {"id": "nokey", "provider": "openai", "base_url": model_server.openai_base_url,
             "api_key_env": "HEARTH_TEST_UNSET_KEY", "model": "mnokey"}
    config = _config(model_server.openai_base_url, more_models=[nokey])
    engine = make_engine(tmp_path, config, [])
    seen: list[dict[str, Any]] = []

    async def body() -> tuple[dict[str, Any], list[EventRow], str | None]:
        await engine.start()
        try:
            opened = await chats.open_chat(engine.db, trust="trusted", model="nokey")
            key = opened.session.key
            sub = engine.bus.subscribe(key)
            view = await turn(engine, key, "hi")
            while not sub.queue.empty():
                seen.append(sub.queue.get_nowait())
            chat = await chats.get_chat(engine.db, key)
            return view, events(engine, key), chat.model
        finally:
            await engine.close()

    model_server.push(Reply(text="From a."), model="ma")
    view, rows, kept = asyncio.run(body())
    said = ("Ran on a instead of this chat's pick nokey: its key (HEARTH_TEST_UNSET_KEY) is not "
            "set in the gateway's environment.")
    assert view["ending"] == "complete" and view["model"] == "a" and kept == "nokey"
    assert _answer(rows).meta["model_substitution"] == said
    assert _answer(rows).meta["turn_telemetry"]["model_substitution"] == said  # Details
    assert any(f.get("note") == said for f in seen)  # live
    assert _models_called(model_server) == ["ma"]


def test_a_chat_in_a_folder_of_its_own_runs_on_the_code_tools_chain(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _config(model_server.openai_base_url, chains={"chat": ["a"],
                                                           "code_tools": ["c"]})
    model_server.push(Reply(text="From c."), model="mc")
    model_server.push(Reply(text="From a."), model="ma")
    folder = tmp_path / "project"
    folder.mkdir()
    engine = make_engine(tmp_path, config, [])
    [(view, rows)] = _turns(engine, ["hi"], workspace_dir=str(folder))
    assert view["model"] == "c"
    assert _answer(rows).meta["turn_telemetry"]["chosen_by"] == "first in the code & tools chain"


def test_an_answer_stopped_at_the_cap_is_kept_marked_and_followed_by_a_notice(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url,
                                           model_a={"max_output_tokens": 300}), [])
    model_server.push(Reply(text="The first part of a long", finish_reason="length"),
                      model="ma")
    [(view, rows)] = _turns(engine, ["write a novel"])
    assert view["ending"] == "complete"
    assert _models_called(model_server) == ["ma"]  # kept, not resent, not failed over
    answer = _answer(rows)
    assert answer.content["text"] == "The first part of a long"
    assert answer.meta["capped"] is True and answer.meta["finish_reason"] == "length"
    notice = rows[-1]
    assert notice.kind == "notice" and notice.seq > answer.seq
    assert notice.content["text"] == (
        "This answer stopped at a's output cap (300 tokens), so it may be unfinished. To allow "
        "longer answers, raise max_output_tokens for a in config.toml or on the Settings page.")


def test_a_whole_answer_is_not_marked_capped(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, _config(model_server.openai_base_url), [])
    model_server.push(Reply(text="Short."), model="ma")
    [(_, rows)] = _turns(engine, ["hi"])
    assert "capped" not in _answer(rows).meta and rows[-1].kind == "assistant"


def test_breakers_skip_a_model_after_repeated_failures(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _config(model_server.openai_base_url, limits={"breaker_failures": 2,
                                                           "breaker_pause_seconds": 3600})
    engine = make_engine(tmp_path, config, [])
    model_server.push(Reply(status=503), Reply(status=503), model="ma")
    model_server.push("b one.", "b two.", "b three.", model="mb")
    results = _turns(engine, ["one", "two", "three"])
    assert [v["model"] for v, _ in results] == ["b", "b", "b"]
    assert _models_called(model_server) == ["ma", "mb", "ma", "mb", "mb"]  # a: open, skipped
    assert _answer(results[2][1]).meta["failover"].startswith(
        "Answered by b: a: its breaker is open after 2 failures in a row")
    assert blocking(lambda: queries.run_status(engine.db, results[2][0]["run_id"])) is not None
