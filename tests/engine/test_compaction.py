"""Compaction: a chat's model view folded into a summary past the threshold, on a prompt
refused as too long (HTTP 413, or a 400 in OpenAI's or Anthropic's words), and on request; the
summary a chore of its own on the background chain, read by a validator (a model whose answer
is no summary hands over to the next); the transcript untouched; restricted chats keep
nothing and compact on their own model alone; a turn whose summary no model could write goes
on compacted, its asks kept.

The scripted server answers the summaries from its chore script (`push_chore`,
`chore_replies["summary"]`), apart from the turns' replies."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic  # noqa: F401 - imported at collection: a cold import of the SDK takes seconds
import pytest

from hearth.config import Config
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn.compaction import fold
from hearth.store import summaries
from hearth.store.transcript import EventRow
from tests.engine_harness import blocking, events, make_engine, new_chat, run, turn
from tests.fakes.model_server import Call, Recorded, Reply, ScriptedModelServer
from tests.support.compaction import OUTPUT, WINDOW, answer, ask, turn_requests
from tests.support.tools import Echo

BACKGROUND = "bg-model"
SPARE = "bg2-model"


def small_window(url: str, *, background: bool = True, provider: str = "openai",
                 chat_url: str | None = None, spare: bool = False, **limits: Any) -> Config:
    """The chat model `fake` on a small window (at `chat_url`, by `provider`), and the
    background chain `bg` (then `bg2`, with `spare`) unless `background` is False."""
    models: list[dict[str, Any]] = [
        {"id": "fake", "provider": provider, "base_url": chat_url or url, "api_key": "sk-test",
         "model": "fake-model", "context_window": WINDOW, "max_output_tokens": OUTPUT}]
    raw: dict[str, Any] = {"tools": {"profile": "full", "allow": ["echo"]}, "models": models,
                           "limits": limits}
    if background:
        names = [("bg", BACKGROUND), ("bg2", SPARE)][: 2 if spare else 1]
        models += [{"id": name, "provider": "openai", "base_url": url, "api_key": "sk-test",
                    "model": model} for name, model in names]
        raw["chains"] = {"chat": ["fake"], "background": [name for name, _ in names]}
    return Config.model_validate(raw)


def prompt_tokens(request: Recorded) -> int:
    """The request's messages and tools as sent, at 3 characters a token (cautious)."""
    sent = json.dumps(request.body.get("messages", [])) + json.dumps(
        request.body.get("tools", []))
    return len(sent) // 3


def engine_on(tmp_path: Path, config: Config, tools: list[Any] | None = None) -> Engine:
    """An engine whose registry has the snapshot's chains (the background one included)."""
    engine = make_engine(tmp_path, config, tools)
    engine.deps = replace(engine.deps, snapshot=Snapshot.first(config, {}))
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
        model_server.push_chore(Reply(text=f"Summary number {n}: beds were planned."),
                                model=BACKGROUND, kind="summary")
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
    summary_calls = [r for r in model_server.calls(chores=True) if r.model == BACKGROUND
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
    assert not [r for r in model_server.every_call() if r.model == BACKGROUND]  # no chore at all
    summaries_asked = model_server.calls(chores=True)
    assert summaries_asked and {r.model for r in summaries_asked} == {"fake-model"}  # its own
    assert max(prompt_tokens(r) for r in turn_requests(model_server)) <= WINDOW - OUTPUT


async def _open(engine: Engine, mode: str) -> str:
    from hearth.sessions import chats

    opened = await chats.open_chat(engine.db, memory_mode=mode)
    return opened.session.key


def test_an_idle_summary_applies_only_while_it_matches_its_turns(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    from sqlalchemy import Connection, delete

    from hearth.engine.background import idle_summaries
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


def _long_chat(engine: Engine, turns: int) -> str:
    """A chat long enough on the small window to have been compacted; its key."""
    async def body() -> str:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, turns + 1):
                assert (await turn(engine, key, ask(n)))["status"] == "complete"
            return key
        finally:
            await engine.close()
    return run(body())


NOT_A_SUMMARY = {
    "empty": Reply(text=""),
    "one word": Reply(text="Summary."),
    "cut at the cap": Reply(text="The user planned beds one to five and", finish_reason="length"),
    "far too long": Reply(text="beds " * 2000),
    "Hearth's own heading": Reply(text="What the user asked earlier, in their own words "
                                       "(oldest first): beds."),
    "a failed call": Reply(status=500),
}


@pytest.mark.parametrize("first", NOT_A_SUMMARY.values(), ids=NOT_A_SUMMARY.keys())
def test_a_background_model_that_writes_no_summary_hands_over_to_the_next(
        tmp_path: Path, model_server: ScriptedModelServer, first: Reply) -> None:
    model_server.default = Reply(text=answer(0))
    model_server.push_chore(first, model=BACKGROUND, kind="summary")
    model_server.push_chore("The second model's summary of the beds.", model=SPARE,
                            kind="summary")
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url, spare=True))
    key = _long_chat(engine, 20)
    asked = [r for r in model_server.calls(chores=True) if r.chore == "summary"]
    assert [r.model for r in asked[:2]] == [BACKGROUND, SPARE]
    assert asked[0].messages == asked[1].messages  # the same request, once each
    rows = blocking(lambda: engine.db.reading(summaries.newest, key))
    kept = [r for r in [rows] if r is not None]
    assert kept, "nothing was compacted"
    first_row = blocking(lambda: engine.db.reading(_oldest_summary, key))
    assert first_row == ("The second model's summary of the beds.", "bg2")


def _oldest_summary(conn: Any, key: str) -> tuple[str, str | None]:
    from sqlalchemy import select

    from hearth.store.schema import context_summaries

    row = conn.execute(select(context_summaries.c.summary, context_summaries.c.model_id)
                       .where(context_summaries.c.session_key == key)
                       .order_by(context_summaries.c.id)).first()
    return (str(row[0]), row[1])


def test_a_turn_whose_summary_no_model_could_write_goes_on_with_the_asks_kept(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    model_server.chore_replies["summary"] = Reply(status=503)
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url, spare=True,
                                              breaker_failures=100))
    key = _long_chat(engine, 20)
    said = [n for n in notices(engine, key) if n.startswith("Conversation compacted")]
    assert said and all("the summary could not be written, so your requests were kept" in n
                        for n in said)
    sent = turn_requests(model_server)
    assert max(prompt_tokens(r) for r in sent) <= WINDOW - OUTPUT  # compacted all the same
    shown = "\n".join(m["content"] for m in sent[-1].messages if m["role"] == "system")
    assert "(no summary could be written)" in shown
    assert "What the user asked earlier, in their own words" in shown and '"Question ' in shown
    asked = {r.model for r in model_server.calls(chores=True) if r.chore == "summary"}
    assert asked == {BACKGROUND, SPARE}  # the whole chain was asked, never the chat's model


def test_a_restricted_chats_summary_is_asked_of_its_own_model_once_never_another(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    model_server.chore_replies["summary"] = Reply(status=503)
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url, spare=True))

    async def body() -> tuple[list[dict[str, Any]], list[str]]:
        await engine.start()
        try:
            key = await _open(engine, "temporary")
            views = [await turn(engine, key, ask(n)) for n in range(1, 21)]
            return views, notices(engine, key)
        finally:
            await engine.close()

    views, said = run(body())
    assert all(v["status"] == "complete" for v in views)
    compacted = [n for n in said if n.startswith("Conversation compacted")]
    assert compacted and all("could not be written" in n for n in compacted)
    chores = model_server.calls(chores=True)
    assert {r.model for r in model_server.every_call()} == {"fake-model"}
    assert len(chores) == len(compacted)  # one call per compaction: no other model, no retry


def test_compact_now_refuses_when_no_model_could_write_the_summary(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    from hearth.engine.turn.compaction import on_request
    from hearth.errors import Refusal

    model_server.default = Reply(text=answer(0))
    model_server.chore_replies["summary"] = Reply(text="OK")
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url,
                                              autocompact_pct=95))

    async def body() -> tuple[Refusal | None, Any, list[str]]:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 9):
                await turn(engine, key, ask(n))
            refused = None
            try:
                await on_request.compact(engine.deps, key)
            except Refusal as error:
                refused = error
            row = await engine.db.reading(summaries.newest, key)
            return refused, row, notices(engine, key)
        finally:
            await engine.close()

    refused, row, said = run(body())
    assert refused is not None and (refused.code, refused.status) == ("summary_failed", 503)
    assert "bg: the summary is 1 word(s), too short to be one" in refused.sentence
    assert row is None and said == []  # nothing was folded, nothing said in the chat


CONTEXT_LENGTH = {
    "openai": {"error": {"message": "This model's maximum context length is 4000 tokens. "
                                    "However, your messages resulted in 4100 tokens.",
                         "type": "invalid_request_error", "param": "messages",
                         "code": "context_length_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error",
                                             "message": "prompt is too long: 4100 tokens > "
                                                        "4000 maximum"}},
}


@pytest.mark.parametrize("provider", CONTEXT_LENGTH)
def test_a_400_saying_the_prompt_is_too_long_compacts_and_retries_once(
        tmp_path: Path, model_server: ScriptedModelServer, provider: str) -> None:
    model_server.default = Reply(text=answer(0))
    chat_url = (model_server.anthropic_base_url if provider == "anthropic"
                else model_server.openai_base_url)
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url, provider=provider,
                                              chat_url=chat_url, autocompact_pct=95))
    refusal = Reply(status=400, error_body=CONTEXT_LENGTH[provider])

    async def body() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 7):
                await turn(engine, key, ask(n))
            model_server.push(refusal, model="fake-model")
            retried = await turn(engine, key, ask(7))
            model_server.push(refusal, refusal, model="fake-model")
            refused = await turn(engine, key, ask(8))
            return retried, refused, notices(engine, key)
        finally:
            await engine.close()

    retried, refused, said = run(body())
    assert retried["status"] == "complete", retried
    assert any("fake refused the prompt as too long" in n for n in said if "compacted" in n)
    sent = turn_requests(model_server)
    assert len(sent) == 6 + 2 + 2  # turn 7 sent twice (refused, then compacted), turn 8 too
    assert prompt_tokens(sent[7]) < prompt_tokens(sent[6])  # the second one compacted
    assert ask(7) in json.dumps(sent[7].messages[-1]["content"])
    assert refused["status"] != "complete"
    assert "too long even after the conversation was compacted" in refused["sentence"]


def test_a_400_for_another_reason_is_no_prompt_too_long(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, small_window(model_server.openai_base_url))
    other = {"error": {"message": "Invalid value for 'temperature'.",
                       "type": "invalid_request_error", "code": "invalid_value"}}

    async def body() -> tuple[dict[str, Any], list[str]]:
        await engine.start()
        try:
            key = new_chat(engine)
            model_server.push(Reply(status=400, error_body=other), model="fake-model")
            view = await turn(engine, key, ask(1))
            return view, notices(engine, key)
        finally:
            await engine.close()

    view, said = run(body())
    assert view["status"] != "complete" and "temperature" in view["sentence"]
    assert not any("compacted" in n for n in said)
    assert len(turn_requests(model_server)) == 1  # not sent again


def test_a_chat_longer_than_the_history_a_turn_reads_folds_what_it_does_not_read(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """A large window, so only the history's length (`history_messages`) calls for a fold:
    once the chat outgrows it, what is older than the read is folded into a summary (never
    left unread), and the next fold is many turns away, not every turn."""
    model_server.default = Reply(text="Noted.")
    for n in range(1, 20):
        model_server.push_chore(Reply(text=f"Summary number {n}: beds were planned."),
                                model=BACKGROUND, kind="summary")
    config = small_window(model_server.openai_base_url, history_messages=20)
    config.models[0].context_window = 200_000
    engine = engine_on(tmp_path, config)

    async def body() -> list[int]:
        await engine.start()
        try:
            key = new_chat(engine)
            for n in range(1, 31):
                await turn(engine, key, f"Question {n}: bed {n}?")
            return await engine.db.reading(_folds, key)
        finally:
            await engine.close()

    folds = run(body())
    assert folds, "the chat outgrew its history and nothing was folded"
    assert len(folds) <= 4, folds  # a fold many turns apart, not one every turn
    last = turn_requests(model_server)[-1].messages
    assert last[1]["content"] == "Question 1: bed 1?"  # the opening, word for word
    summary = [m for m in last if str(m["content"]).startswith("Summary number")
               or "Summary number" in str(m["content"])]
    assert summary, [str(m["content"])[:60] for m in last]  # what the read does not reach
    asked = " ".join(str(m["content"]) for m in last)
    assert "Question 5: bed 5?" in asked  # an early ask, listed with the summary
    assert last[-1]["content"] == "Question 30: bed 30?"


def _folds(conn: Any, key: str) -> list[int]:
    """Where each of the chat's summaries ends (through_seq), oldest first."""
    return [int(seq) for (seq,) in conn.exec_driver_sql(
        "SELECT through_seq FROM context_summaries WHERE session_key = ? ORDER BY id", (key,))]


def test_a_summary_keeps_the_names_of_the_files_it_folded() -> None:
    """The folded messages' files are named in what the summary model reads and in the asks
    the view keeps word for word, a message of files alone included."""
    def sent(seq: int, text: str, names: list[str]) -> EventRow:
        files = [{"id": f"att_{n}", "name": n, "type": "text/plain", "size": 1, "sha256": "0"}
                 for n in names]
        return EventRow("c", seq, f"e{seq}", None, None, "user", {"text": text},
                        {"attachments": files} if files else {}, None, f"run{seq}", 0.0)

    events_ = [sent(1, "Read these", ["plan.pdf", "beds.png"]), sent(2, "", ["map.png"]),
               sent(3, "Thanks", [])]
    material = fold._material(None, events_, 10_000)
    assert "User: Read these [sent: plan.pdf, beds.png]" in material
    assert fold._asks(None, events_, 10_000) == [
        '"Read these" [sent: plan.pdf, beds.png]', "[sent: map.png]", '"Thanks"']
