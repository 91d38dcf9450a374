"""Compaction: a chat's model view folded into a summary past the threshold, on a prompt
refused as too long, and on request; the transcript untouched; restricted chats keep nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hearth.config import Config
from hearth.engine.runtime import Engine
from hearth.models.registry import ModelRegistry
from hearth.store import summaries
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome
from tests.engine_harness import blocking, events, make_engine, new_chat, run, turn
from tests.fakes.model_server import Call, Recorded, Reply, ScriptedModelServer

WINDOW = 4000
OUTPUT = 512
BACKGROUND = "bg-model"


class Echo:
    """A read-only tool that answers with what it was given."""

    name = "echo"
    description = "Say the words back."
    parameters: dict[str, Any] = {"type": "object", "properties": {"words": {"type": "string"}}}
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(output=f"echo: {args.get('words', '')}", receipt="Echoed.")


def small_window(url: str, *, background: bool = True, **limits: Any) -> Config:
    models: list[dict[str, Any]] = [
        {"id": "fake", "provider": "openai", "base_url": url, "api_key": "sk-test",
         "model": "fake-model", "context_window": WINDOW, "max_output_tokens": OUTPUT}]
    raw: dict[str, Any] = {"tools": {"profile": "full", "allow": ["echo"]}, "models": models,
                           "limits": limits}
    if background:
        models.append({"id": "bg", "provider": "openai", "base_url": url, "api_key": "sk-test",
                       "model": BACKGROUND})
        raw["chains"] = {"chat": ["fake"], "background": ["bg"]}
    return Config.model_validate(raw)


def ask(n: int) -> str:
    return f"Question {n}: where should bed {n} go, and what grows well beside it? " + (
        "Some detail about the soil and the light. " * 5)


def answer(n: int) -> str:
    return f"Answer {n}: bed {n} goes by the south wall. " + ("More advice on spacing. " * 8)


def prompt_tokens(request: Recorded) -> int:
    """The request's messages and tools as sent, at 3 characters a token (cautious)."""
    sent = json.dumps(request.body.get("messages", [])) + json.dumps(
        request.body.get("tools", []))
    return len(sent) // 3


def turn_requests(server: ScriptedModelServer) -> list[Recorded]:
    return [r for r in server.requests if r.model == "fake-model"
            and not str(r.messages[0]["content"]).startswith("You compact a conversation")]


def engine_on(tmp_path: Path, config: Config, tools: list[Any] | None = None) -> Engine:
    """An engine whose registry has the snapshot's chains (the background one included)."""
    engine = make_engine(tmp_path, config, tools)
    engine.deps = replace(engine.deps, models=ModelRegistry.from_config(config, {}))
    return engine


def notices(engine: Engine, key: str) -> list[str]:
    return [str(e.content["text"]) for e in events(engine, key) if e.kind == "notice"]


def chat_of(engine: Engine, key: str, count: int, first: int = 1) -> list[dict[str, Any]]:
    async def body() -> list[dict[str, Any]]:
        return [await turn(engine, key, ask(n)) for n in range(first, first + count)]
    return blocking(body)


def test_a_long_chat_on_a_small_window_keeps_answering_under_the_window(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url))

    async def body() -> list[dict[str, Any]]:
        await engine.start()
        try:
            key = new_chat(engine)
            views = [await turn(engine, key, ask(n)) for n in range(1, 61)]
            said = notices(engine, key)
            rows = await engine.db.reading(summaries.newest, key)
            return [*views, {"said": said, "row": rows, "events": len(events(engine, key))}]
        finally:
            await engine.close()

    *views, last = run(body())
    assert all(v["status"] == "complete" for v in views), [v["ending"] for v in views]
    sent = turn_requests(model_server)
    assert len(sent) == 60
    assert max(prompt_tokens(r) for r in sent) <= WINDOW - OUTPUT
    compacted = [n for n in last["said"] if n.startswith("Conversation compacted: freed ")]
    assert len(compacted) >= 3
    assert last["row"] is not None and last["row"].kind == "compaction"
    assert last["events"] >= 120 + len(compacted)  # the transcript keeps every message
    first = sent[-1].messages
    assert first[1]["content"] == ask(1)  # the opening is read word for word
    assert first[-1]["content"] == ask(60)  # so is the running turn's request


def test_the_summary_lists_the_asks_and_a_later_one_carries_the_earlier(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    for n in range(1, 40):
        model_server.push(Reply(text=f"Summary number {n}: beds were planned."), model=BACKGROUND)
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url))

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 31):
                await turn(engine, key, ask(n))
        finally:
            await engine.close()

    run(body())
    summary_calls = [r for r in model_server.requests if r.model == BACKGROUND
                     and str(r.messages[0]["content"]).startswith("You compact")]
    assert len(summary_calls) >= 2
    second = summary_calls[1].messages[-1]["content"]
    assert "Earlier summary:\nSummary number " in second
    last_turn = turn_requests(model_server)[-1].messages
    shown = "\n".join(m["content"] for m in last_turn if m["role"] == "system")
    assert "What the user asked earlier, in their own words" in shown
    assert "Question 2: where should bed 2 go" in shown or "earlier requests" in shown
    assert any(f'"Question {n}: where should bed {n} go' in shown for n in range(2, 30))


def test_compaction_never_splits_a_call_from_its_results(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url), [Echo()])

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 31):
                if n % 3 == 0:
                    model_server.push(
                        Reply(tool_calls=[Call("echo", {"words": f"w{n}a " * 30}, id=f"a{n}"),
                                          Call("echo", {"words": f"w{n}b"}, id=f"b{n}")]),
                        Reply(text=answer(n)))
                await turn(engine, key, ask(n))
        finally:
            await engine.close()

    run(body())
    for request in turn_requests(model_server):
        asked: set[str] = set()
        answered: set[str] = set()
        for message in request.messages:
            for call in message.get("tool_calls") or []:
                asked.add(call["id"])
            if message["role"] == "tool":
                assert message["tool_call_id"] in asked, "a result without its call"
                answered.add(message["tool_call_id"])
        assert asked == answered, "a call without its results"
    assert max(prompt_tokens(r) for r in turn_requests(model_server)) <= WINDOW - OUTPUT


def test_a_prompt_refused_as_too_long_is_compacted_and_sent_once_more(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url,
                                                autocompact_pct=95))

    async def body() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 7):
                await turn(engine, key, ask(n))
            model_server.push(Reply(status=413), model="fake-model")
            retried = await turn(engine, key, ask(7))
            model_server.push(Reply(status=413), Reply(status=413), model="fake-model")
            refused = await turn(engine, key, ask(8))
            return retried, refused, notices(engine, key)
        finally:
            await engine.close()

    retried, refused, said = run(body())
    assert retried["status"] == "complete"
    assert any("fake refused the prompt as too long" in n for n in said if "compacted" in n)
    assert refused["status"] != "complete"
    assert "too long even after the conversation was compacted" in refused["sentence"]


def test_context_pct_is_in_the_answers_telemetry(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello", usage=(1200, 2)))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url))

    async def body() -> dict[str, Any]:
        await engine.start()
        try:
            key = new_chat(engine)
            await turn(engine, key, "hi")
            final = [e for e in events(engine, key) if e.kind == "assistant"][-1]
            return dict(final.meta["turn_telemetry"])
        finally:
            await engine.close()

    telemetry = run(body())
    assert telemetry["context_pct"] == 30.0  # 1200 of 4000 tokens


def test_a_restricted_chat_compacts_on_its_own_model_and_keeps_nothing(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url))

    async def body() -> tuple[list[dict[str, Any]], Any, list[str]]:
        await engine.start()
        try:
            key = blocking(lambda: _open(engine, "incognito"))
            views = [await turn(engine, key, ask(n)) for n in range(1, 25)]
            kept = await engine.db.reading(summaries.newest, key)
            return views, kept, notices(engine, key)
        finally:
            await engine.close()

    views, kept, said = run(body())
    assert all(v["status"] == "complete" for v in views)
    assert kept is None
    assert any(n.startswith("Conversation compacted") for n in said)
    assert not [r for r in model_server.requests if r.model == BACKGROUND]  # no chore, no summary
    assert max(prompt_tokens(r) for r in turn_requests(model_server)) <= WINDOW - OUTPUT


async def _open(engine: Engine, mode: str) -> str:
    from hearth.sessions import chats

    opened = await chats.open_chat(engine.db, memory_mode=mode)
    return opened.session.key


def test_an_idle_summary_applies_only_while_it_matches_its_turns(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    from sqlalchemy import Connection, delete

    from hearth.engine import idle_summaries
    from hearth.store.schema import transcript_events

    model_server.default = Reply(text=answer(0))
    config = small_window(model_server.openai_base_url)
    config = config.model_copy(update={"models": [
        m.model_copy(update={"context_window": 128_000}) for m in config.models]})
    engine = engine_on(tmp_path, config)

    def drop(conn: Connection, key: str, seq: int) -> None:
        conn.execute(delete(transcript_events).where(transcript_events.c.session_key == key,
                                                     transcript_events.c.seq == seq))

    async def body() -> tuple[int, Any, list[Recorded]]:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 41):
                await turn(engine, key, ask(n))
            done = await idle_summaries.sweep(engine.deps, idle_seconds=0, unsummarized=10)
            row = await engine.db.reading(summaries.current, key)
            await turn(engine, key, ask(41))  # reads the summary
            assert row is not None
            await engine.db.writing(drop, key, row.through_seq - 1)  # a summarized turn goes
            stale = await engine.db.reading(summaries.current, key)
            await turn(engine, key, ask(42))  # reads the turns again
            return done, (row, stale), turn_requests(model_server)
        finally:
            await engine.close()

    done, (row, stale), sent = run(body())
    assert done == 1 and row.kind == "idle" and stale is None
    with_summary, without = sent[-2].messages, sent[-1].messages
    summary = [m["content"] for m in with_summary if m["role"] == "system"][-1]
    assert summary.startswith("Summary of the earlier part") and row.summary in summary
    assert ask(3) not in [m["content"] for m in with_summary]
    assert not any("Summary of the earlier part" in str(m["content"]) for m in without)
    assert ask(3) in [m["content"] for m in without]


def test_compact_on_request_through_the_api(tmp_path: Path,
                                            model_server: ScriptedModelServer) -> None:
    from tests.gateway import write_config
    from tests.inprocess import InProcessGateway

    model_server.default = Reply(text=answer(0))
    home = tmp_path / "home"
    write_config(home, model_server.openai_base_url,
                 f"context_window = {WINDOW}\nmax_output_tokens = {OUTPUT}\ntools = false\n")
    gateway = InProcessGateway(home).start()
    api = gateway.client()
    try:
        key = api.new_chat()
        early = api.http.post(f"/api/sessions/{key}/compact")
        for n in range(1, 6):
            api.wait(api.send(key, ask(n))["run_id"])
        done = api.http.post(f"/api/sessions/{key}/compact")
        incognito = api.new_chat(memory_mode="incognito")
        refused = api.http.post(f"/api/sessions/{incognito}/compact")
        said = [m["text"] for m in api.messages(key) if m["kind"] == "notice"]
        api.wait(api.send(key, ask(6))["run_id"])
    finally:
        api.http.close()
        gateway.kill()
    assert early.status_code == 200 and early.json()["compacted"] is False
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["compacted"] is True and body["freed_pct"] > 0
    assert body["sentence"].startswith("Conversation compacted: freed ")
    assert "you asked for it" in body["sentence"] and said == [body["sentence"]]
    assert refused.status_code == 409 and refused.json()["error"]["code"] == (
        "compact_keeps_nothing")
    last = turn_requests(model_server)[-1].messages
    asked = [m["content"] for m in last if m["role"] == "user"]
    assert asked[0] == ask(1) and asked[-1] == ask(6) and ask(2) not in asked
