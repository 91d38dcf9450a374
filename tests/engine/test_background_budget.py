"""The background budget (issue 43): background calls bounded per hour and per turn, never
failing over onto a model outside the background chain, an unusable answer not asked for
again and again, and each owed chore saying why. Against the real engine and the scripted
model server (a model that answers every title with nothing)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from hearth.config import Config, LimitsConfig
from hearth.engine.background.budget import HOUR, BackgroundBudget
from hearth.engine.runtime import Engine
from hearth.store import owed_chores as owed_store
from tests.engine.test_chores import FAST, _asked, _engine, _new_chat, _until
from tests.engine_harness import turn
from tests.fakes.model_server import Reply, ScriptedModelServer


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _budget(clock: Clock, per_hour: int, per_turn: int) -> BackgroundBudget:
    limits = LimitsConfig(background_calls_per_hour=per_hour,
                          background_calls_per_turn=per_turn)
    return BackgroundBudget(lambda: limits, clock)


def test_the_hour_is_a_sliding_window_and_says_when_it_has_room() -> None:
    clock = Clock()
    budget = _budget(clock, per_hour=3, per_turn=0)
    budget.seed([clock.now - HOUR + 10, clock.now - 2 * HOUR])  # one still in the hour
    assert budget.take(None) is None and budget.take(None) is None
    refused = budget.take(None)
    assert refused is not None and refused.how == "budget"
    assert "3 calls an hour" in refused.sentence
    assert budget.ready_in() == 10.0  # the seeded call leaves the hour then
    clock.now += 10
    assert budget.ready_in() == 0.0 and budget.take(None) is None


def test_a_turn_has_its_own_bound_and_zero_is_none() -> None:
    clock = Clock()
    budget = _budget(clock, per_hour=0, per_turn=2)
    assert budget.for_turn("run_a").take() is None and budget.take("run_a") is None
    refused = budget.take("run_a")
    assert refused is not None and refused.how == "turn_budget"
    assert budget.take("run_b") is None  # another turn's calls are its own
    assert all(budget.take(None) is None for _ in range(100))  # no hourly bound
    assert budget.ready_in() == 0.0


def _config(url: str, **limits: Any) -> Config:
    """A chat chain with a second (priced) model after the first, and no background chain."""
    models = [{"id": name, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"{name}-model"} for name in ("fake", "priced")]
    return Config.model_validate({"tools": {"profile": "full"}, "models": models,
                                  "chains": {"chat": ["fake", "priced"]}, "limits": limits,
                                  "learning": {"every_turns": 1}})


def _titles_for(server: ScriptedModelServer, question: str) -> int:
    return sum(1 for r in _asked(server) if question in r.messages[-1]["content"])


async def _chats(engine: Engine, server: ScriptedModelServer, count: int,
                 start: int = 0) -> list[str]:
    keys = []
    for n in range(start, start + count):
        key = await _new_chat(engine)
        server.push(f"Answer {n}.", model="fake-model")
        assert (await turn(engine, key, f"Question for chat {n}?"))["status"] == "complete"
        await engine.chores.settled()
        keys.append(key)
    return keys


def test_a_model_that_titles_badly_is_held_to_the_budget_and_the_chain(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    server = model_server
    server.chore_replies["title"] = Reply(text="")  # every model answers, never with a title

    async def body() -> None:
        config = _config(server.openai_base_url, background_calls_per_hour=8,
                         background_calls_per_turn=3)
        engine = _engine(tmp_path, server, replace(FAST, first_pause=0.1), config)
        await engine.start()
        try:
            [first] = await _chats(engine, server, 1)
            await _until(lambda: _title_given_up(engine, first))  # its second unusable try
            await _chats(engine, server, 5, start=1)  # the hour's budget is spent among these
            await asyncio.sleep(0.5)  # the retry loop's passes, with nothing left to try
            made = server.calls(chores=True)
            assert {r.model for r in made} == {"fake-model"}  # never the priced fallback
            assert len(made) == 8  # the hour's budget, whatever is still owed
            assert _titles_for(server, "Question for chat 0?") == 2  # then given up
            owed = await engine.db.reading(owed_store.listing, 100)
            assert owed and all(row.reason for row in owed)
            assert any("8 calls an hour is spent" in (row.reason or "") for row in owed)
            listed = await engine.delivery_desk.listing()
            assert {c.row.reason for c in listed.chores} == {row.reason for row in owed}
        finally:
            await engine.close()

    asyncio.run(body())


async def _title_given_up(engine: Engine, key: str) -> bool:
    return not await engine.db.reading(owed_store.owed_for, key, "title")
