"""One owner of model state: the engine's snapshot holds the config and the registry read from
it, swapped whole by `Engine.adopt` (from config.toml's, the one input), a running turn keeps
its own; the registry takes its chains from the config alone; the breakers are configured once
per snapshot, never per turn, and what they learned outlives a Settings save."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from hearth.config import Config
from hearth.engine.snapshot import Snapshot
from hearth.models.breakers import Breakers
from hearth.models.registry import ModelRegistry
from hearth.sessions import chats
from hearth.settings import Settings
from tests.engine_harness import make_engine, turn
from tests.fakes.model_server import Reply, ScriptedModelServer


def _config(url: str = "http://127.0.0.1:9/v1", **raw: Any) -> Config:
    models = [{"id": m, "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": f"m{m}"} for m in ("a", "b", "c")]
    return Config.model_validate({"tools": {"profile": "full"}, "models": models, **raw})


def test_adopt_swaps_the_config_and_the_models_together_from_config_toml(
        tmp_path: Path) -> None:
    """Before: `adopt` set `engine.config` and `deps` apart, and the registry carried chains
    of its own beside the config's: two owners that could disagree."""
    engine = make_engine(tmp_path, _config(chains={"chat": ["a", "b"]}))
    before, running = engine.snapshot, engine.deps  # what a turn begun now holds
    engine.adopt(Settings(chat_chain=["b"], user_name="Ana"))
    after = engine.snapshot
    assert after is not before and engine.deps.snapshot is after
    assert engine.config is after.config and after.models.config is after.config
    assert after.config.chains.chat == after.models.chat_chain == ["b"]
    assert after.config.agent.user_name == "Ana"
    assert engine.choices() == after.choices()
    # the running turn's snapshot is untouched, its config and models alike
    assert running.snapshot is before and running.config is before.config
    assert before.models.chat_chain == ["a", "b"] and before.config.agent.user_name is None
    # each save is laid over config.toml's, not over the last snapshot
    engine.adopt(Settings(user_name="Bo"))
    assert engine.snapshot.models.chat_chain == ["a", "b"]
    assert engine.config.agent.user_name == "Bo"


def test_a_snapshot_refuses_a_registry_read_from_another_config() -> None:
    config = _config()
    assert Snapshot(config, ModelRegistry(config)).models.ids() == ["a", "b", "c"]
    with pytest.raises(ValueError, match="its own config"):
        Snapshot(config, ModelRegistry(_config(chains={"chat": ["c"]})))


def test_the_registry_takes_its_chains_from_the_config_alone() -> None:
    """Before: `ModelRegistry(models, chat_chain, chains=, background_chain=)` and
    `resolve(chains=)` could each say another chain than the config."""
    made = inspect.signature(ModelRegistry).parameters
    assert not {"chains", "chat_chain", "background_chain", "models"} & set(made)
    assert "chains" not in inspect.signature(ModelRegistry.resolve).parameters
    config = _config(chains={"chat": ["b", "a"], "background": ["c"]})
    registry = ModelRegistry(config)
    assert registry.chat_chain == ["b", "a"]
    assert registry.chain("background") == registry.background_chain == ["c"]
    assert registry.chain("code_tools") == ["b", "a"]  # empty: the chat chain
    resolved = registry.resolve("code_tools", picked="c")
    assert [(c.model_id, c.chosen_by) for c in resolved.order] == [
        ("c", "this chat's own model"), ("b", "first in the chat chain"),
        ("a", "next in the chat chain")]


def test_breakers_are_configured_once_per_snapshot_and_a_paused_model_stays_paused(
        tmp_path: Path, model_server: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every turn configured the breakers again from its config. Now a snapshot
    configures them as it is made; a model its breaker paused stays paused after a save."""
    configured: list[tuple[int, float]] = []
    real = Breakers.configure

    def counted(self: Breakers, failures: int, pause: float) -> None:
        configured.append((failures, pause))
        real(self, failures, pause)

    monkeypatch.setattr(Breakers, "configure", counted)
    config = _config(model_server.openai_base_url, chains={"chat": ["a"], "background": ["c"]},
                     limits={"breaker_failures": 2, "breaker_pause_seconds": 600})
    engine = make_engine(tmp_path, config)
    assert configured == [(2, 600)]  # the first snapshot's
    model_server.push(Reply(text="one"), Reply(text="two"))

    async def body() -> None:
        await engine.start()
        try:
            key = (await chats.open_chat(engine.db, trust="trusted")).session.key
            for text in ("hi", "again"):
                assert (await turn(engine, key, text))["status"] == "complete"
            assert configured == [(2, 600)]  # never per turn
            breakers = engine.snapshot.models.breakers
            breakers.failed("a")
            breakers.failed("a")
            engine.adopt(Settings(user_name="Ana"))  # a Settings save
            assert configured == [(2, 600)] * 2  # once, for the new snapshot
            assert engine.snapshot.models.breakers is breakers
            assert breakers.state("a").state == "open"
            asked = len(model_server.calls())  # the turns' (chores run on c)
            ended = await turn(engine, key, "after the save")
            assert ended["status"] != "complete"  # a is still paused: not asked
            assert len(model_server.calls()) == asked
        finally:
            await engine.close()

    asyncio.run(body())
