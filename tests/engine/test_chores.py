"""Chores after a turn on a background chain of two scripted models (bg1, then bg2): a kept
chat is titled once, from its first exchange; the owner's rename wins; Incognito and Temporary
chats never reach a background model; a model whose answer is no title hands over to the next;
a title no model could give is owed, kept across a restart, and given later; deleting the
chat drops what it was owed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hearth.config import Config
from hearth.engine.chores import Pace
from hearth.engine.runtime import Engine
from hearth.models.registry import ModelRegistry
from hearth.sessions import chats
from hearth.store import owed_chores as owed_store
from hearth.store import sessions as session_store
from hearth.store.owed_chores import OwedRow
from tests.engine_harness import make_engine, turn
from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer

TITLE_MARK = "You name conversations"
LEARNING_MARK = "long-term memory"
QUESTION = "Which bakeries open early near Alfama in Lisbon?"
ANSWER = "Padaria do Povo opens at seven."
FAST = Pace(first_pause=0.2, longest_pause=0.2, tick=0.05)
IDLE = Pace(first_pause=0.2, longest_pause=0.2, tick=3600.0)  # looks only when it starts


def _system(recorded: Recorded) -> str:
    return next((str(m.get("content", "")) for m in recorded.messages
                 if m.get("role") == "system"), "")


class ChoreServer(ScriptedModelServer):
    """The scripted server, answering the title and learning chores from queues of their own
    (per model for titles), so a chat's turns keep theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.titles: dict[str, deque[Reply]] = {}
        self.title_default = Reply(text="Early bakeries in Lisbon")
        self.learning_reply = Reply(text='{"items": []}')

    def _take(self, recorded: Recorded) -> Reply:
        system = _system(recorded)
        if TITLE_MARK not in system and LEARNING_MARK not in system:
            return super()._take(recorded)
        with self._arrived:
            self.requests.append(recorded)
            self._arrived.notify_all()
            if LEARNING_MARK in system:
                return self.learning_reply
            queue = self.titles.get(recorded.model)
            return queue.popleft() if queue else self.title_default

    def title_calls(self) -> list[Recorded]:
        return [r for r in self.calls() if TITLE_MARK in _system(r)]

    def background_calls(self) -> list[Recorded]:
        return [r for r in self.calls() if r.model != "fake-model"]


@pytest.fixture
def server() -> Iterator[ChoreServer]:
    with ChoreServer() as running:
        yield running


def _config(url: str) -> Config:
    models = [{"id": name, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"{name}-model"} for name in ("fake", "bg1", "bg2")]
    return Config.model_validate({"tools": {"profile": "full"}, "models": models,
                                  "chains": {"chat": ["fake"], "background": ["bg1", "bg2"]}})


def _engine(tmp: Path, server: ChoreServer, pace: Pace = FAST) -> Engine:
    config = _config(server.openai_base_url)
    engine = make_engine(tmp, config, tools=[])
    engine.deps = replace(engine.deps, models=ModelRegistry.from_config(config, environ={}))
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


async def _first_exchange(engine: Engine, server: ChoreServer, key: str) -> None:
    server.push(ANSWER, model="fake-model")
    view = await turn(engine, key, QUESTION)
    assert view["status"] == "complete", view


def test_a_chat_is_titled_once_from_its_first_exchange(tmp_path: Path,
                                                       server: ChoreServer) -> None:
    server.titles["bg1-model"] = deque([Reply(text='"Early bakeries in Alfama."')])

    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Alfama"
            (asked,) = server.title_calls()
            assert asked.model == "bg1-model"
            system, user = asked.messages  # its own prompt and the one exchange, nothing else
            assert QUESTION in user["content"] and ANSWER in user["content"]
            assert LEARNING_MARK not in system["content"] + user["content"]
            server.push("Also Manteigaria.", model="fake-model")
            assert (await turn(engine, key, "And a second one?"))["status"] == "complete"
            await engine.chores.settled()
            assert len(server.title_calls()) == 1  # titled once: not after the second turn
            assert await _title(engine, key) == "Early bakeries in Alfama"
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_rename_by_the_owner_while_the_chore_runs_wins(tmp_path: Path,
                                                         server: ChoreServer) -> None:
    hold, started = threading.Event(), threading.Event()
    server.titles["bg1-model"] = deque([Reply(text="The model's title", hold=hold,
                                              started=started)])

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
            assert len(server.title_calls()) == 1  # it answered, and was not written
            assert await _title(engine, key) == "My bakery list"
            assert await _owed(engine, key) == []
        finally:
            hold.set()
            await engine.close()

    asyncio.run(body())


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_restricted_chats_are_titled_by_mode_and_reach_no_background_model(
        tmp_path: Path, server: ChoreServer, mode: str) -> None:
    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine, mode)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert server.background_calls() == []  # no title, no learning: nothing sent
            assert [r.model for r in server.calls()] == ["fake-model"]
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
        tmp_path: Path, server: ChoreServer, first: Reply) -> None:
    server.titles["bg1-model"] = deque([first])
    server.titles["bg2-model"] = deque([Reply(text="Second model's title")])

    async def body() -> None:
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            assert await _title(engine, key) == "Second model's title"
            asked = server.title_calls()
            assert [r.model for r in asked] == ["bg1-model", "bg2-model"]
            assert asked[0].messages == asked[1].messages  # the same request, once each
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_title_no_model_could_give_is_owed_across_a_restart_and_given_later(
        tmp_path: Path, server: ChoreServer) -> None:
    server.titles["bg1-model"] = deque([Reply(text="")])
    server.titles["bg2-model"] = deque([Reply(status=503)])

    async def first_process() -> str:
        engine = _engine(tmp_path, server, IDLE)
        await engine.start()
        try:
            key = await _new_chat(engine)
            await _first_exchange(engine, server, key)
            await engine.chores.settled()
            (owed,) = await _owed(engine, key)
            assert (owed.kind, owed.attempts) == ("title", 1) and owed.run_id is not None
            assert await _title(engine, key) is None
            server.push("Manteigaria.", model="fake-model")  # a later turn asks no title
            assert (await turn(engine, key, "Another?"))["status"] == "complete"
            await engine.chores.settled()
            assert len(server.title_calls()) == 2
            return key
        finally:
            await engine.close()

    async def second_process(key: str) -> None:
        await asyncio.sleep(FAST.first_pause)  # its next try is due
        engine = _engine(tmp_path, server)
        await engine.start()
        try:
            await _until(lambda: _title(engine, key))
            await engine.chores.settled()
            assert await _title(engine, key) == "Early bakeries in Lisbon"
            retried = server.title_calls()[2]
            assert retried.model == "bg1-model"
            assert QUESTION in retried.messages[1]["content"]  # from the first exchange
            assert await _owed(engine, key) == []
        finally:
            await engine.close()

    key = asyncio.run(first_process())
    asyncio.run(second_process(key))


def test_deleting_a_chat_drops_the_chores_it_was_owed(tmp_path: Path,
                                                      server: ChoreServer) -> None:
    server.title_default = Reply(status=500)

    async def body() -> None:
        engine = _engine(tmp_path, server, IDLE)
        await engine.start()
        try:
            key = await _new_chat(engine)
            kept = await _new_chat(engine)
            for chat in (key, kept):
                await _first_exchange(engine, server, chat)
                await engine.chores.settled()
            assert [r.kind for r in await _owed(engine, key)] == ["title"]
            await engine.delete_chat(key)
            assert await _owed(engine, key) == []
            assert [r.kind for r in await _owed(engine, kept)] == ["title"]  # only its own
            server.title_default = Reply(text="A title at last")
            await asyncio.sleep(FAST.first_pause)
            asked = len(server.title_calls())
            assert await engine.chores.retry_due() == 1  # the kept chat's alone
            await engine.chores.settled()
            assert len(server.title_calls()) == asked + 1
            assert await _title(engine, kept) == "A title at last"
        finally:
            await engine.close()

    asyncio.run(body())
