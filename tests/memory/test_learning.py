"""After-turn learning against the scripted model server: what is kept, what is refused, and
that restricted chats never reach a model for it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.config import Config
from hearth.memory.learning import Learned, learn_after_turn
from hearth.memory.service import Memory
from hearth.models import guard
from hearth.models.registry import ModelRegistry
from hearth.models.types import Provider
from hearth.privacy import stores
from hearth.store.db import Database
from hearth.store.schema import audit
from tests.engine_harness import make_config
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.store import migrated

CHAT = "chat-1"
QUESTION = "I moved to Lisbon last month; can you suggest a bakery near Alfama?"
ANSWER = "Try Padaria do Povo on Rua de São Miguel; it opens at 7."


@dataclass
class Setup:
    server: ScriptedModelServer
    db: Database
    memory: Memory
    provider: Provider

    def learn(self, mode: object = "persistent", question: str = QUESTION,
              answer: str = ANSWER) -> Learned:
        result: Learned = asyncio.run(learn_after_turn(
            self.memory, [self.provider], db=self.db, session_key=CHAT, recorded_mode=mode,
            run_id="run-1", question=question, answer=answer))
        return result

    def audit_rows(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            rows = conn.execute(select(audit).order_by(audit.c.id))
            return [dict(r._mapping) for r in rows]

    def items(self) -> list[Any]:
        return self.memory.items(limit=100)


@pytest.fixture
def setup(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[Setup]:
    config = make_config(model_server.openai_base_url, chains={"background": ["fake"]})
    registry = ModelRegistry.from_config(config, environ={})
    provider = registry.for_background()
    assert provider is not None and provider.model_id == "fake"
    db = migrated(tmp_path, "hearth.db")
    stores.protect(db)
    memory = Memory(db, tmp_path / "memory")
    memory.start()
    yield Setup(model_server, db, memory, provider)
    db.close()


def items_json(*items: tuple[str, str]) -> str:
    return json.dumps({"items": [{"kind": k, "text": t} for k, t in items]})


def test_valid_answer_keeps_each_item_written_by_learning_and_filed_under_the_chat(
        setup: Setup) -> None:
    setup.server.push_chore(Reply(text=items_json(
        ("fact", "The owner moved to Lisbon recently."),
        ("preference", "The owner likes bakeries that open early."))))
    learned = setup.learn()
    assert learned == Learned(written=2, known=0)
    kept = sorted(setup.items(), key=lambda i: i.id)
    assert [(i.kind, i.text) for i in kept] == [
        ("fact", "The owner moved to Lisbon recently."),
        ("preference", "The owner likes bakeries that open early.")]
    assert {i.written_by for i in kept} == {"learning:fake"}
    assert {i.filed_under for i in kept} == {CHAT}
    rows = setup.audit_rows()
    assert [r["action"] for r in rows] == ["memory.learned"]
    assert rows[0]["detail"] == {"model": "fake", "count": 2, "new": 2}
    assert rows[0]["session_key"] == CHAT and rows[0]["run_id"] == "run-1"
    assert [h.item.text for h in setup.memory.recall("anything about Lisbon?")] == [
        "The owner moved to Lisbon recently."]


def test_the_request_carries_the_prompt_and_the_exchange_capped(setup: Setup) -> None:
    setup.server.push_chore(Reply(text='{"items": []}'))
    learned = setup.learn(question="q" * 10_000, answer="a" * 10_000)
    assert learned.written == 0 and not learned.failed and learned.why_none
    (call,) = setup.server.calls("/v1/chat/completions", chores=True)
    system, user = call.body["messages"]
    assert system["role"] == "system" and '{"items": []}' in system["content"]
    assert user["content"].count("q") <= 4_100 and user["content"].count("a") <= 4_100
    assert "tools" not in call.body
    assert setup.items() == [] and setup.audit_rows() == []


def test_a_json_fence_around_the_answer_is_accepted(setup: Setup) -> None:
    fenced = "```json\n" + items_json(("lesson", "Suggest places with opening hours.")) + "\n```"
    setup.server.push_chore(Reply(text=fenced))
    assert setup.learn().written == 1
    assert [i.text for i in setup.items()] == ["Suggest places with opening hours."]


def test_an_item_said_again_is_kept_once(setup: Setup) -> None:
    answer = items_json(("fact", "The owner moved to Lisbon recently."))
    setup.server.push_chore(Reply(text=answer), Reply(text=answer))
    assert setup.learn() == Learned(written=1)
    assert setup.learn() == Learned(written=0, known=1)
    assert len(setup.items()) == 1


WRONG_SHAPES = {
    "not json": "Sure! The owner lives in Lisbon.",
    "missing items": json.dumps({"memories": []}),
    "extra key": json.dumps({"items": [], "note": "x"}),
    "items not a list": json.dumps({"items": {"kind": "fact", "text": "Lives in Lisbon."}}),
    "a list at the top": json.dumps([{"kind": "fact", "text": "Lives in Lisbon."}]),
    "four items": items_json(*[("fact", f"Fact number {n} about it.") for n in range(4)]),
    "unknown kind": items_json(("fact", "Lives in Lisbon."), ("opinion", "Likes bread.")),
    "empty text": items_json(("fact", "")),
    "short text": items_json(("fact", " ab ")),
    "long text": items_json(("fact", "x" * 501)),
    "text not a string": json.dumps({"items": [{"kind": "fact", "text": 42}]}),
    "extra nesting of items": json.dumps({"items": [[{"kind": "fact", "text": "In Lisbon."}]]}),
    "extra nesting of text": json.dumps(
        {"items": [{"kind": "fact", "text": {"value": "Lives in Lisbon."}}]}),
    "extra nesting of the object": json.dumps(
        {"result": {"items": [{"kind": "fact", "text": "Lives in Lisbon."}]}}),
    "extra field on an item": json.dumps(
        {"items": [{"kind": "fact", "text": "Lives in Lisbon.", "why": "said so"}]}),
    "json then prose": items_json(("fact", "Lives in Lisbon.")) + "\nHope that helps!",
}


@pytest.mark.parametrize("said", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_a_wrong_shape_writes_nothing_and_is_audited(setup: Setup, said: str) -> None:
    setup.server.push_chore(Reply(text=said))
    learned = setup.learn()
    assert learned.failed and learned.written == 0 and learned.why_none
    assert setup.items() == []
    rows = setup.audit_rows()
    assert [r["action"] for r in rows] == ["memory.learning_failed"]
    assert set(rows[0]["detail"]) == {"model", "reason"}
    assert rows[0]["detail"]["model"] == "fake"
    assert "Lisbon" not in json.dumps(rows[0]["detail"])  # never the words


def test_a_valid_item_next_to_a_wrong_one_is_not_kept_either(setup: Setup) -> None:
    setup.server.push_chore(Reply(text=items_json(("fact", "Lives in Lisbon."), ("fact", ""))))
    assert setup.learn().failed
    assert setup.items() == []


def test_a_model_error_is_a_failure_not_a_crash(setup: Setup) -> None:
    setup.server.push_chore(Reply(status=500))
    learned = setup.learn()
    assert learned.failed and learned.written == 0
    (row,) = setup.audit_rows()
    assert row["action"] == "memory.learning_failed"
    assert row["detail"]["reason"] == "the model call failed (provider_unavailable)"


def test_an_answer_cut_at_the_output_cap_is_a_failure(setup: Setup) -> None:
    setup.server.push_chore(Reply(text='{"items": [{"kind": "fact", "te', finish_reason="length"))
    assert setup.learn().failed
    assert setup.items() == []


@pytest.mark.parametrize("mode", ["incognito", "temporary", "???", None, "Persistent"])
def test_restricted_chats_never_learn_and_never_call_the_model(setup: Setup,
                                                               mode: object) -> None:
    setup.server.push_chore(Reply(text=items_json(("fact", "The owner moved to Lisbon."))))
    learned = setup.learn(mode=mode)
    assert learned.written == 0 and not learned.failed
    assert learned.why_none is not None and "never learn" in learned.why_none
    assert setup.server.every_call() == []
    assert setup.items() == [] and setup.audit_rows() == []


def test_no_background_chain_means_learning_on_the_chat_chain(model_server: ScriptedModelServer
                                                             ) -> None:
    config = make_config(model_server.openai_base_url)
    registry = ModelRegistry.from_config(config, environ={})
    background = registry.for_background()
    assert background is not None and background is registry.for_chat()
    assert registry.chain("background") == registry.chat_chain == ["fake"]
    assert ModelRegistry(config).background_chain == ["fake"]
    assert ModelRegistry(Config()).for_background() is None  # no model at all: none


class SeenCalls:
    """A stand-in for the guard's call recorder: what each call was for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    def ended(self, call: Any, error: BaseException | None) -> None:
        self.calls.append((call.model_id, call.purpose, call.session_key))


def test_the_learning_call_is_recorded_by_the_guard_as_learning(setup: Setup) -> None:
    seen = SeenCalls()
    setup.server.push_chore(Reply(text='{"items": []}', usage=(1000, 500)))
    before = guard.install(seen)  # type: ignore[arg-type]
    try:
        setup.learn()
    finally:
        guard.install(before)
    assert seen.calls == [("fake", "learning", CHAT)]
