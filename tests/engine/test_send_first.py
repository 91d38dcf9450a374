"""`engine.send_first`: a chat opened by its first message in one transaction — the chat, the
message and its run all written, or none of them (a failed send leaves no empty chat); the
same client message id again answers the same chat and run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, func, select

from hearth.engine.intake import admission, first_message
from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.privacy.principal import OWNER
from hearth.store import runs as run_store, transcript
from hearth.store.schema import sessions
from tests.engine_harness import make_config, make_engine
from tests.fakes.model_server import Reply, ScriptedModelServer

T = TypeVar("T")


def _chats(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(sessions)).scalar_one())


def running(engine: Engine, body: Callable[[], Awaitable[T]]) -> T:
    async def whole() -> T:
        await engine.start()
        try:
            return await body()
        finally:
            await engine.close()

    return asyncio.run(whole())


@pytest.fixture
def engine(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[Engine]:
    made = make_engine(tmp_path, make_config(model_server.openai_base_url))
    yield made
    made.db.close()


def test_the_first_message_opens_the_chat_and_its_turn_answers(
        engine: Engine, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Hello to you."))

    async def body() -> tuple[Any, ...]:
        sent = await engine.send_first("Hello there", memory_mode="incognito", trust="trusted",
                                       client_message_id="m-1", principal=OWNER)
        key = sent.session.key
        # acknowledged: the message and the run are committed (invariant 1)
        first = await engine.db.reading(transcript.at, key, 1)
        run = await engine.db.reading(run_store.get, sent.admitted.run_id)
        await engine.bus.wait_run(sent.admitted.run_id, 15)
        view = await queries.run_status(engine.db, sent.admitted.run_id)
        events = await engine.db.reading(transcript.window, key, 100)
        return sent, first, run, view, events

    sent, first, run, view, events = running(engine, body)
    assert sent.session.memory_mode == "incognito" and sent.session.trust == "trusted"
    assert sent.session.message_count == 1 and sent.admitted.duplicate is False
    assert first is not None and first.content == {"text": "Hello there"}
    assert run is not None and run.session_key == sent.session.key
    assert view is not None and view["status"] == "complete"
    assert [e.kind for e in events] == ["user", "assistant"]


def test_the_same_client_message_id_answers_the_same_chat_and_run(engine: Engine) -> None:
    async def body() -> tuple[Any, Any, int]:
        one = await engine.send_first("Plan my week", client_message_id="same", dispatch=False,
                                      principal=OWNER)
        again = await engine.send_first("Plan my week", client_message_id="same",
                                        dispatch=False, principal=OWNER)
        return one, again, await engine.db.reading(_chats)

    one, again, count = running(engine, body)
    assert again.session.key == one.session.key
    assert again.admitted.run_id == one.admitted.run_id and again.admitted.duplicate is True
    assert count == 1


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"text": "  "}, "empty_message"),
    ({"text": "x" * (admission.MAX_TEXT_BYTES + 1)}, "message_too_large"),
    ({"text": "hi", "client_message_id": ""}, "invalid_client_message_id"),
    ({"text": "hi", "model": "gpt-9"}, "unknown_model"),
    ({"text": "hi", "agent": "ghost"}, "unknown_agent"),
    ({"text": "hi", "memory_mode": "forever"}, "invalid_memory_mode"),
    ({"text": "hi", "trust": "always"}, "invalid_trust"),
    ({"text": "hi", "workspace_dir": "relative/dir"}, "invalid_workspace_dir"),
])
def test_a_refused_send_opens_no_chat(engine: Engine, kwargs: dict[str, Any], code: str) -> None:
    async def body() -> tuple[Refusal, int]:
        text = kwargs.pop("text")
        with pytest.raises(Refusal) as refused:
            await engine.send_first(text, **kwargs, principal=OWNER)
        return refused.value, await engine.db.reading(_chats)

    refused, count = running(engine, body)
    assert refused.code == code and count == 0


def test_a_send_that_fails_in_its_transaction_leaves_no_empty_chat(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat is made in the message's own transaction: had it been made first, on its own
    (as opening a chat, then sending, does), this failure would leave it behind, empty."""
    def failing_admit(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(first_message.admission, "admit_in", failing_admit)

    async def body() -> int:
        with pytest.raises(RuntimeError):
            await engine.send_first("hello", principal=OWNER)
        return await engine.db.reading(_chats)

    assert running(engine, body) == 0


def test_a_stopping_gateway_opens_no_chat(engine: Engine) -> None:
    async def body() -> tuple[Refusal, int]:
        engine.stop_admitting()
        with pytest.raises(Refusal) as refused:
            await engine.send_first("hello", principal=OWNER)
        return refused.value, await engine.db.reading(_chats)

    refused, count = running(engine, body)
    assert (refused.code, refused.status, count) == ("shutting_down", 503, 0)
