"""When learning runs (`[learning]`, `engine.background.chores`): not after every turn, but
after every `every_turns` completed turns or once a chat is left alone `idle_seconds`; each
pass reads every exchange since the last, so none is learned from twice or skipped, a restart
included; a chat deleted learns nothing more; a pass no model can do is owed once per chat,
and the turns after it ask no model for it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hearth.config import Config
from hearth.engine.background.chores import Pace
from hearth.engine.runtime import Engine
from hearth.sessions import chats
from hearth.store import owed_chores as owed_store
from tests.engine_harness import make_engine, turn
from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer

SLOW = Pace(first_pause=3600.0, longest_pause=3600.0, tick=3600.0)  # no retry in the test


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as running:
        yield running


def _config(url: str, **learning: Any) -> Config:
    models = [{"id": name, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"{name}-model"} for name in ("fake", "bg1", "bg2")]
    return Config.model_validate({"tools": {"profile": "full"}, "models": models,
                                  "chains": {"chat": ["fake"], "background": ["bg1", "bg2"]},
                                  "learning": learning})


def _engine(folder: Path, server: ScriptedModelServer, **learning: Any) -> Engine:
    engine = make_engine(folder, _config(server.openai_base_url, **learning), tools=[])
    engine.chores.pace = SLOW
    return engine


def _learned(server: ScriptedModelServer) -> list[Recorded]:
    return [r for r in server.calls(chores=True) if r.chore == "learning"]


def _read(call: Recorded) -> str:
    return str(call.messages[1]["content"])


async def _say(engine: Engine, key: str, *texts: str) -> None:
    for text in texts:
        assert (await turn(engine, key, text))["status"] == "complete"
        await engine.chores.settled()


async def _chat(engine: Engine) -> str:
    return (await chats.open_chat(engine.db, trust="trusted")).session.key


async def _until_learned(server: ScriptedModelServer, count: int) -> None:
    for _ in range(200):
        if len(_learned(server)) >= count:
            return
        await asyncio.sleep(0.05)


def test_learning_runs_every_n_turns_reading_each_exchange_once(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    async def body() -> None:
        engine = _engine(tmp_path, server, every_turns=3, idle_seconds=3600)
        await engine.start()
        try:
            key = await _chat(engine)
            await _say(engine, key, "first question", "second question")
            assert _learned(server) == []  # not after each turn
            await _say(engine, key, "third question")
            (one,) = _learned(server)
            assert all(q in _read(one) for q in ("first", "second", "third"))
            await _say(engine, key, "fourth question", "fifth question", "sixth question")
            (_, two) = _learned(server)
            assert all(q in _read(two) for q in ("fourth", "fifth", "sixth"))
            assert not any(q in _read(two) for q in ("first", "second", "third"))
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_chat_left_idle_learns_what_was_said_since_the_last_pass(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    async def body() -> None:
        engine = _engine(tmp_path, server, every_turns=100, idle_seconds=0.3)
        await engine.start()
        try:
            key = await _chat(engine)
            await _say(engine, key, "first question", "second question")
            await _until_learned(server, 1)
            (one,) = _learned(server)
            assert "first question" in _read(one) and "second question" in _read(one)
            await asyncio.sleep(0.6)
            assert len(_learned(server)) == 1  # nothing new: no pass
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_restart_loses_no_exchange_and_learns_none_twice(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    async def first() -> str:
        engine = _engine(tmp_path, server, every_turns=100, idle_seconds=3600)
        await engine.start()
        try:
            key = await _chat(engine)
            await _say(engine, key, "before the restart")
            return key
        finally:
            await engine.close()  # stopped before the chat went idle

    async def again(wait: float) -> None:
        engine = _engine(tmp_path, server, every_turns=100, idle_seconds=0.2)
        await engine.start()
        try:
            await asyncio.sleep(wait)
            await engine.chores.settled()
        finally:
            await engine.close()

    asyncio.run(first())
    assert _learned(server) == []
    asyncio.run(again(1.0))
    (one,) = _learned(server)
    assert "before the restart" in _read(one)
    asyncio.run(again(0.6))
    assert len(_learned(server)) == 1  # learned from once


def test_a_deleted_chat_learns_nothing_more(tmp_path: Path, server: ScriptedModelServer) -> None:
    async def body() -> None:
        engine = _engine(tmp_path, server, every_turns=100, idle_seconds=0.3)
        await engine.start()
        try:
            key = await _chat(engine)
            await _say(engine, key, "soon deleted")
            await engine.delete_chat(key)
            await asyncio.sleep(0.7)
            await engine.chores.settled()
            assert _learned(server) == []
        finally:
            await engine.close()

    asyncio.run(body())


def test_learning_no_model_can_do_is_owed_once_per_chat_and_asks_no_more(
        tmp_path: Path, server: ScriptedModelServer) -> None:
    server.chore_replies["learning"] = Reply(text="Sure! Here is what I learned.")  # no JSON

    async def body() -> None:
        engine = _engine(tmp_path, server, every_turns=1, idle_seconds=3600)
        await engine.start()
        try:
            key = await _chat(engine)
            await _say(engine, key, "one", "two", "three", "four")
            owed = await engine.db.reading(owed_store.owed_for, key, "learning")
            assert len(owed) == 1 and owed[0].run_id is None  # the chat's, once
            assert [r.model for r in _learned(server)] == ["bg1-model", "bg2-model"]
            server.chore_replies["learning"] = Reply(text='{"items": []}')
            engine.chores.pace = Pace(first_pause=0.0, longest_pause=0.0, tick=0.05)
            await engine.db.writing(owed_store.put_back, owed[0].id, attempts=1, next_at=0.0,
                                   reason=None)
            assert await engine.chores.retry_due() == 1
            await engine.chores.settled()
            last = _learned(server)[-1]
            assert all(f"<question>\n{q}\n</question>" in _read(last)
                       for q in ("one", "two", "three", "four"))  # none lost while owed
            assert await engine.db.reading(owed_store.owed_for, key, "learning") == []
        finally:
            await engine.close()

    asyncio.run(body())
