"""Chores after a turn on a background chain of two scripted models (bg1, then bg2), or on the
chat chain when no background chain is set: a kept chat is titled once, from its first
exchange; the owner's rename wins; Incognito and Temporary chats never reach a background
model; a model whose answer is no title hands over to the next; a chore no model could do is
owed, kept across a restart, tried again when a model's breaker lets a call through (never
while every one is resting), and done later; an idle summary no model could write is owed
too; deleting the chat drops what it was owed.

The scripted server answers chores from a script of their own (`push_chore`,
`chore_replies`), so a chat's turns keep the replies pushed for them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hearth.config import Config
from hearth.engine.background import idle_summaries
from hearth.engine.background.chores import Pace
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.models.registry import ModelRegistry
from hearth.sessions import chats
from hearth.store import owed_chores as owed_store, sessions as session_store, summaries
from hearth.store.owed_chores import OwedRow
from tests.engine_harness import make_engine, turn
from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer

QUESTION = "Which bakeries open early near Alfama in Lisbon?"
ANSWER = "Padaria do Povo opens at seven."
FAST = Pace(first_pause=0.2, longest_pause=0.2, tick=0.05)
SLOW = Pace(first_pause=3600.0, longest_pause=3600.0, tick=3600.0)  # no retry in the test


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as running:
        running.chore_replies["title"] = Reply(text="Early bakeries in Lisbon")
        yield running


def _asked(server: ScriptedModelServer, kind: str = "title") -> list[Recorded]:
    return [r for r in server.calls(chores=True) if r.chore == kind]


def _config(url: str, background: list[str] | None = None,
            learning: dict[str, Any] | None = None, **limits: Any) -> Config:
    """The three models and chains; learning after every turn unless `learning` says."""
    models = [{"id": name, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"{name}-model"} for name in ("fake", "bg1", "bg2")]
    chains = {"chat": ["fake"], "background": ["bg1", "bg2"] if background is None
              else background}
    return Config.model_validate({"tools": {"profile": "full"}, "models": models,
                                  "chains": chains, "limits": limits,
                                  "learning": learning or {"every_turns": 1}})


def _engine(tmp: Path, server: ScriptedModelServer, pace: Pace = FAST,
            config: Config | None = None) -> Engine:
    config = config or _config(server.openai_base_url)
    engine = make_engine(tmp, config, tools=[])
    engine.deps = replace(engine.deps, snapshot=Snapshot.first(config, environ={}))
    engine.chores.pace = pace
    return engine


async def _title(engine: Engine, key: str) -> str | None:
    row = await engine.db.reading(session_store.get, key)
    assert row is not None
    return row.title


async def _owed(engine: Engine, key: str) -> list[OwedRow]:
    return await engine.db.reading(owed_store.owed_for, key, None)


async def _until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


async def _new_chat(engine: Engine, mode: str = "persistent") -> str:
    opened = await chats.open_chat(engine.db, memory_mode=mode, trust="trusted")
    return opened.session.key


async def _first_exchange(engine: Engine, server: ScriptedModelServer, key: str,
                          question: str = QUESTION) -> None:
    server.push(ANSWER, model="fake-model")
    view = await turn(engine, key, question)
    assert view["status"] == "complete", view


def test_a_chat_is_titled_once_from_its_first_exchange(tmp_path: Path,
                                                       server: ScriptedModelServer) -> None:
    server.push_chore(Reply(text='"Early bakeries in Alfama."'), model="bg1-model", kind="title")

    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Alfama"
            (asked,) = _asked(server)
            assert asked.model == "bg1-model"
            system, user = asked.messages  # its own prompt and the one exchange, nothing else
            assert QUESTION in user["content"] and ANSWER in user["content"]
            assert "long-term memory" not in system["content"] + user["content"]
            server.push("Also Manteigaria.", model="fake-model")
            assert (await turn(engine, key, "And a second one?"))["status"] == "complete"
            await engine.chores.settled()
            assert len(_asked(server)) == 1  # titled once: not after the second turn
            assert len(_asked(server, "learning")) == 2  # learning after each turn (set so)
            assert await _title(engine, key) == "Early bakeries in Alfama"
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    asyncio.run(body())


def test_with_no_background_chain_the_chores_run_on_the_chat_chain(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    config = _config(server.openai_base_url, background=[])

    async def body() -> None:
        engine = _engine(tmp_path, server, config=config)
        await engine.start()
        try:
            key = await _new_chat(engine)
            server.push("First answer.", "Second answer.")  # the turns', in order
            assert (await turn(engine, key, QUESTION))["status"] == "complete"
            await engine.chores.settled()
            assert (await turn(engine, key, "And then?"))["status"] == "complete"
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Lisbon"
            assert [r.model for r in _asked(server)] == ["fake-model"]  # the chat chain's
            assert [r.model for r in _asked(server, "learning")] == ["fake-model"] * 2
            answers = [m["text"] for m in await _messages(engine, key)
                       if m["kind"] == "assistant"]
            assert answers == ["First answer.", "Second answer."]
        finally:
            await engine.close()

    asyncio.run(body())


async def _messages(engine: Engine, key: str) -> list[dict[str, Any]]:
    from hearth.store import transcript

    rows = await engine.db.reading(transcript.window, key, 100)
    return [{"kind": r.kind, "text": r.content.get("text")} for r in rows]


def test_a_rename_by_the_owner_while_the_chore_runs_wins(tmp_path: Path,
                                                         server: ScriptedModelServer) -> None:
    hold, started = threading.Event(), threading.Event()
    server.push_chore(Reply(text="The model's title", hold=hold, started=started),
                      model="bg1-model", kind="title")
    server.chore_replies["learning"] = Reply(text='{"items": []}', hold=hold)

    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            assert await asyncio.to_thread(started.wait, 10)  # the title is being asked
            await chats.update(engine.db, key, title="My bakery list")
            hold.set()
            await engine.chores.settled()
            assert len(_asked(server)) == 1  # it answered, and was not written
            assert await _title(engine, key) == "My bakery list"
            assert await _owed(engine, key) == []
        finally:
            hold.set()
            await engine.close()

    asyncio.run(body())


@pytest.mark.parametrize("background", [["bg1", "bg2"], []], ids=["background", "chat chain"])
@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_restricted_chats_are_titled_by_mode_and_reach_no_background_model(
        tmp_path: Path, server: ScriptedModelServer, mode: str, background: list[str]) -> None:
    config = _config(server.openai_base_url, background=background)

    async def body() -> None:
        engine = _engine(tmp_path, server, config=config)
        await engine.start()
        try:
            key = await _new_chat(engine, mode)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert server.calls(chores=True) == []  # no title, no learning: nothing sent
            assert [r.model for r in server.every_call()] == ["fake-model"]
            assert await _title(engine, key) == chats.MODE_TITLES[mode]
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    asyncio.run(body())


NOT_A_TITLE = {
    "empty": Reply(text=""),
    "spaces only": Reply(text="   "),
    "too long": Reply(text="Bakeries " * 12),
    "two lines": Reply(text="Bakeries\nin Lisbon"),
    "cut at the cap": Reply(text="Bakeries in", finish_reason="length"),
    "a text-direction mark": Reply(text="Bakeries \u202ein Lisbon"),
    "a failed call": Reply(status=500),
}


@pytest.mark.parametrize("first", NOT_A_TITLE.values(), ids=NOT_A_TITLE.keys())
def test_a_first_model_that_gives_no_title_hands_over_to_the_next(
        tmp_path: Path, server: ScriptedModelServer, first: Reply) -> None:
    server.chore_replies["title"] = Reply(text="Second model's title")
    server.push_chore(first, model="bg1-model", kind="title")

    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine)
            server.chore_replies["learning"] = Reply(text='{"items": []}')
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert await _title(engine, key) == "Second model's title"
            asked = _asked(server)
            assert [r.model for r in asked] == ["bg1-model", "bg2-model"]
            assert asked[0].messages == asked[1].messages  # the same request, once each
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_title_no_model_could_give_is_owed_across_a_restart_and_given_later(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    server.chore_replies["title"] = Reply(text="")  # every model answers no title

    async def first_process() -> str:
        engine = _engine(tmp_path, server, replace(FAST, first_pause=0.5, longest_pause=0.5))
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            (owed,) = await _owed(engine, key)
            assert owed.kind == "title" and owed.attempts >= 1 and owed.run_id is not None
            assert await _title(engine, key) is None
            server.push("Manteigaria.", model="fake-model")  # a later turn asks no title
            assert (await turn(engine, key, "Another?"))["status"] == "complete"
            await engine.chores.settled()
            asked = [r.messages[1]["content"] for r in _asked(server)]
            assert all(QUESTION in m and "Another?" not in m for m in asked)
            return key
        finally:
            await engine.close()

    async def second_process(key: str) -> None:
        server.chore_replies["title"] = Reply(text="Early bakeries in Lisbon")
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            await _until(lambda: _title(engine, key))
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Lisbon"
            retried = _asked(server)[-1]
            assert retried.model == "bg1-model"
            assert QUESTION in retried.messages[1]["content"]  # from the first exchange
            await _until(lambda: _none_owed(engine, key))
        finally:
            await engine.close()

    key = asyncio.run(first_process())
    asyncio.run(second_process(key))


def _count_passes(engine: Engine) -> Callable[[], int]:
    """Count the owed-chores loop's passes from now on; how many so far."""
    passes = [0]
    look = engine.chores.retry_due

    async def counted() -> int:
        passes[0] += 1
        return await look()

    engine.chores.retry_due = counted  # type: ignore[method-assign]
    return lambda: passes[0]


async def _none_owed(engine: Engine, key: str) -> bool:
    return await _owed(engine, key) == []


def test_owed_chores_wait_for_the_breaker_and_go_when_it_lets_a_call_through(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    pause = 1.5
    config = _config(server.openai_base_url, background=["bg1"], breaker_failures=1,
                     breaker_pause_seconds=pause)
    server.chore_replies["title"] = Reply(status=503)  # the background model is down
    server.chore_replies["learning"] = Reply(status=503)

    async def body() -> None:
        engine = _engine(tmp_path, server, replace(FAST, tick=30.0), config=config)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            opened = engine.snapshot.models.breakers.state("bg1").since  # wall-clock
            owed = await _owed(engine, key)
            assert sorted(r.kind for r in owed) == ["learning", "title"]
            assert all(r.attempts == 0 for r in owed)  # no model could be asked: uncounted
            sent = len(server.calls(chores=True))
            assert sent >= 1  # the call that opened the breaker
            passes = _count_passes(engine)
            await asyncio.sleep(pause * 0.6)
            assert len(server.calls(chores=True)) == sent  # nothing while it rests:
            assert await _owed(engine, key) == owed  # not even claimed and put back
            assert passes() <= 3  # the loop sleeps until the breaker's pause ends
            server.chore_replies["title"] = Reply(text="Early bakeries in Lisbon")
            server.chore_replies["learning"] = Reply(text='{"items": []}')
            await _until(lambda: _title(engine, key))
            assert time.time() - opened >= pause  # not before the breaker's pause
            await _until(lambda: _none_owed(engine, key))
            assert engine.snapshot.models.breakers.state("bg1").state == "closed"
        finally:
            await engine.close()

    asyncio.run(body())


def test_owed_chores_left_by_a_dead_process_go_once_models_may_be_called(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    config = _config(server.openai_base_url, background=["bg1"], breaker_failures=1,
                     breaker_pause_seconds=3600)
    server.chore_replies["title"] = Reply(status=503)

    async def first_process() -> str:
        engine = _engine(tmp_path, server, config=config)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert "title" in [r.kind for r in await _owed(engine, key)]
            return key
        finally:
            await engine.close()

    async def second_process(key: str) -> None:
        server.chore_replies["title"] = Reply(text="Early bakeries in Lisbon")
        engine = _engine(tmp_path, server, replace(FAST, tick=30.0), config=config)
        await engine.start()  # its breakers are new: closed
        try:
            await _until(lambda: _title(engine, key))
            await _until(lambda: _none_owed(engine, key))
        finally:
            await engine.close()

    key = asyncio.run(first_process())
    asyncio.run(second_process(key))


def test_an_idle_summary_no_model_could_write_is_owed_and_written_later(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    server.default = Reply(text="An answer about the garden beds, with some detail. " * 40)
    server.chore_replies["summary"] = Reply(text="OK.")  # no summary: too short to be one

    async def body() -> None:
        engine = _engine(tmp_path, server, replace(FAST, first_pause=1.0, longest_pause=1.0))
        engine.chores.register(idle_summaries.KIND,
                               idle_summaries.doer(lambda: engine.deps, engine.chores.budget,
                                                   idle_seconds=0))
        await engine.start()
        try:
            key = await _new_chat(engine)
            for n in range(1, 16):
                assert (await turn(engine, key, f"Question {n} about bed {n}."))["status"] \
                    == "complete"
            await engine.chores.settled()
            done = await idle_summaries.sweep(engine.deps, engine.chores, idle_seconds=0,
                                              unsummarized=10)
            assert done == 0
            assert await engine.db.reading(summaries.newest, key) is None  # nothing folded
            assert [r.kind for r in await _owed(engine, key)] == ["summary"]
            assert [r.model for r in _asked(server, "summary")] == ["bg1-model", "bg2-model"]
            server.chore_replies["summary"] = Reply(text="Beds one to fifteen were planned.")
            await _until(lambda: _none_owed(engine, key))
            row = await engine.db.reading(summaries.newest, key)
            assert row is not None and row.kind == "idle"
            assert row.summary == "Beds one to fifteen were planned."
            assert row.model_id == "bg1"
        finally:
            await engine.close()

    asyncio.run(body())


def test_deleting_a_chat_drops_the_chores_it_was_owed(tmp_path: Path,
                                                      server: ScriptedModelServer) -> None:
    server.chore_replies["title"] = Reply(text="")  # no title from any model

    async def body() -> None:
        engine = _engine(tmp_path, server, replace(FAST, first_pause=0.5, longest_pause=0.5))
        await engine.start()
        try:
            key = await _new_chat(engine)
            kept = await _new_chat(engine)
            await _first_exchange(engine, server, key, "Deleted chat's question?")
            await _first_exchange(engine, server, kept, QUESTION)
            await engine.chores.settled()
            assert [r.kind for r in await _owed(engine, key)] == ["title"]
            await engine.delete_chat(key)
            assert await _owed(engine, key) == []
            assert [r.kind for r in await _owed(engine, kept)] == ["title"]  # only its own
            asked = len(_asked(server))
            server.chore_replies["title"] = Reply(text="A title at last")
            await _until(lambda: _title(engine, kept))
            assert await _title(engine, kept) == "A title at last"
            later = _asked(server)[asked:]
            assert later and all(QUESTION in r.messages[1]["content"] for r in later)
            await _until(lambda: _none_owed(engine, kept))
        finally:
            await engine.close()

    asyncio.run(body())


class Watched(ModelRegistry):
    """The registry, noting each provider asked for while an event loop ran in that thread
    (building an SDK client there would hold up every chat)."""

    on_loop: list[str]

    def provider(self, model_id: str) -> Any:
        try:
            asyncio.get_running_loop()
            self.on_loop.append(model_id)
        except RuntimeError:
            pass
        return super().provider(model_id)


def test_chores_build_their_models_off_the_event_loop(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    config = _config(server.openai_base_url)
    registry = Watched.from_config(config, environ={})
    registry.on_loop = []

    async def body() -> None:
        engine = _engine(tmp_path, server)
        engine.deps = replace(engine.deps, snapshot=Snapshot(config, registry))
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Lisbon"
        finally:
            await engine.close()

    asyncio.run(body())
    assert {r.model for r in server.calls(chores=True)} == {"bg1-model"}
    assert registry.on_loop == []


def test_a_chore_no_model_ever_does_is_given_up_after_its_counted_tries(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    server.chore_replies["title"] = Reply(text="")  # a model answers, never with a title

    async def body() -> None:
        pace = replace(FAST, first_pause=0.3, longest_pause=0.3, most_attempts=3,
                       most_unusable=10)  # the fewer of the two bounds an unusable chore
        config = _config(server.openai_base_url, background_calls_per_turn=0)  # no turn bound
        engine = _engine(tmp_path, server, pace, config)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert [r.attempts for r in await _owed(engine, key)] == [1]
            await _until(lambda: _none_owed(engine, key))
            await asyncio.sleep(0.3)  # and no try after it was given up
            assert len(_asked(server)) == 3 * 2  # three tries, each of both models
            assert await _title(engine, key) is None
        finally:
            await engine.close()

    asyncio.run(body())
