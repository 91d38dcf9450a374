"""An engine in this process (no HTTP), on a private store, talking to the scripted server.

For tests that need tools of their own (slow ones, ones that count their runs) or that look
at the engine's records directly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from hearth.clock import Clock
from hearth.config import Config
from hearth.engine.compose import private_engine
from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.privacy.principal import OWNER
from hearth.sessions import chats
from hearth.store import transcript
from hearth.store.transcript import EventRow
from hearth.tools.base import Tool
from tests.support.store import seed

T = TypeVar("T")


def make_config(model_url: str | None, **sections: dict[str, Any]) -> Config:
    raw: dict[str, Any] = {"tools": {"profile": "full"}}  # tests bring tools of their own
    raw.update(sections)
    if model_url is not None:
        raw["models"] = [{"id": "fake", "provider": "openai", "base_url": model_url,
                          "api_key": "sk-test", "model": "fake-model"}]
    return Config.model_validate(raw)


def make_engine(tmp: Path, config: Config, tools: Iterable[Tool] | None = None,
                clock: Clock | None = None) -> Engine:
    """An engine on the template store in `tmp`; its timed loops on `clock` when given
    (tests/support/clock.py's `FakeClock`)."""
    seed(tmp / "hearth.db")  # the template store (tests/support/store.py), not a migration
    return private_engine(tmp, config, tools, clock)


async def turn(engine: Engine, key: str, text: str, timeout: float = 15) -> dict[str, Any]:
    """Send a message and wait for its run to end; the run's view."""
    admitted = await engine.send(key, text, principal=OWNER)
    await engine.bus.wait_run(admitted.run_id, timeout)
    view = await queries.run_status(engine.db, admitted.run_id)
    assert view is not None and view["status"] not in ("admitted", "running"), view
    return view


def new_chat(engine: Engine, trust: str = "trusted") -> str:
    """A new chat, trusted unless said otherwise (see tests.gateway.Api.new_chat)."""
    opened = blocking(lambda: chats.open_chat(engine.db, trust=trust))
    return opened.session.key


def events(engine: Engine, key: str) -> list[EventRow]:
    return blocking(lambda: engine.db.reading(transcript.window, key, 10_000))


def blocking(make: Callable[[], Awaitable[T]]) -> T:
    """Test code's way to the store from anywhere: run the awaitable `make()` gives to its
    end, in a thread of its own when this thread runs an event loop (the store refuses to
    block a loop), else here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    box: list[Any] = []

    def work() -> None:
        try:
            box.append((True, asyncio.run(_awaited(make))))
        except BaseException as error:  # noqa: BLE001 - handed back to the caller below
            box.append((False, error))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    result: T = value
    return result


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def one_turn(engine: Engine, text: str) -> tuple[dict[str, Any], list[EventRow]]:
    """Start the engine, run one message in a new chat, close: the run and the transcript."""

    async def body() -> tuple[dict[str, Any], list[EventRow]]:
        await engine.start()
        try:
            key = new_chat(engine)
            view = await turn(engine, key, text)
            return view, events(engine, key)
        finally:
            await engine.close()

    result: tuple[dict[str, Any], list[EventRow]] = asyncio.run(body())
    return result


class BlockingChats:
    """`hearth.sessions.chats`'s awaited functions, called from a test's plain code."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(chats, name)
        return lambda *args, **kwargs: blocking(lambda: fn(*args, **kwargs))


blocking_chats = BlockingChats()
