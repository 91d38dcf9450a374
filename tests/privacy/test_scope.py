"""The work scope follows a turn's work into every task and thread; a plain thread pool would
drop it, so none is allowed (census, with the plain pool as its positive control)."""

from __future__ import annotations

import ast
import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hearth.privacy import scope
from hearth.privacy.modes import Mode, keeps_memory, mode_of, reads_memory, restricted
from hearth.privacy.principal import OWNER
from hearth.privacy.scope import ScopeCarryingExecutor, as_work_of, install_default_executor
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome
from tests.engine_harness import make_config, make_engine, run, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.census import found_by

ALLOWED_POOL_HOME = "threads.py"


def test_the_mode_reader_fails_closed() -> None:
    assert mode_of("persistent") is Mode.PERSISTENT and mode_of("incognito") is Mode.INCOGNITO
    for unknown in ("Persistent", "private", "", None, 3, b"persistent"):
        assert mode_of(unknown) is Mode.UNREADABLE
    assert [keeps_memory(m) for m in Mode] == [True, False, False, False]
    assert [reads_memory(m) for m in Mode] == [True, True, False, False]
    assert [restricted(m) for m in Mode] == [False, True, True, True]


def test_the_scope_follows_into_tasks_threads_and_the_default_executor() -> None:
    seen: dict[str, Any] = {}

    async def body() -> None:
        install_default_executor(asyncio.get_running_loop())
        with as_work_of("chat-1-1", "incognito"):
            seen["task"] = await asyncio.create_task(_scope_now())
            seen["to_thread"] = await asyncio.to_thread(scope.current)
            loop = asyncio.get_running_loop()
            seen["default"] = await loop.run_in_executor(None, scope.current)
            with ScopeCarryingExecutor(1) as pool:
                seen["carrying"] = pool.submit(scope.current).result()
        seen["after"] = scope.current()

    run(body())
    expected = scope.WorkScope("chat-1-1", Mode.INCOGNITO)
    assert [seen[k] for k in ("task", "to_thread", "default", "carrying")] == [expected] * 4
    assert seen["after"] is None


def test_positive_control_a_plain_pool_drops_the_scope() -> None:
    with as_work_of("chat-1-1", "temporary"), ThreadPoolExecutor(1) as pool:
        assert pool.submit(scope.current).result() is None


async def _scope_now() -> scope.WorkScope | None:
    return scope.current()


def plain_pools(name: str, tree: ast.Module) -> list[str]:
    """Places that make a thread or process pool, or hand work to an explicit executor."""
    if name == ALLOWED_POOL_HOME:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func.split(".")[-1] in ("ThreadPoolExecutor", "ProcessPoolExecutor", "Thread"):
            found.append(f"{name}:{node.lineno} makes {func}")
        if func.endswith("run_in_executor") and node.args and not (
                isinstance(node.args[0], ast.Constant) and node.args[0].value is None):
            found.append(f"{name}:{node.lineno} runs work on an explicit executor")
    return found


def test_census_detector_finds_a_planted_plain_pool() -> None:
    planted = ast.parse(
        "from concurrent.futures import ThreadPoolExecutor\n"
        "pool = ThreadPoolExecutor(4)\n"
        "async def f(loop):\n"
        "    await loop.run_in_executor(pool, print)\n"
    )
    assert len(plain_pools("memory/recall.py", planted)) == 2


def test_census_no_plain_pool_anywhere_in_the_gateway() -> None:
    assert found_by(plain_pools) == []


class ScopeProbe:
    """A tool that reports the scope it runs in, on the loop and in a worker thread."""

    name = "probe"
    description = "Report the work scope."
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    def __init__(self) -> None:
        self.seen: list[scope.WorkScope | None] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        self.seen.append(scope.current())
        self.seen.append(await asyncio.to_thread(scope.current))
        self.seen.append(await asyncio.get_running_loop().run_in_executor(None, scope.current))
        return ToolOutcome(output="ok", receipt="Probed.")


def test_a_turn_runs_as_its_chat_in_the_chats_mode(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    probe = ScopeProbe()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [probe])
    model_server.push(Reply(tool_calls=[Call("probe", {})]), Reply(text="done"))

    async def body() -> str:
        from hearth.sessions import chats

        await engine.start()
        opened = await chats.open_chat(engine.db, memory_mode="incognito", trust="trusted")
        key = opened.session.key
        await turn(engine, key, "probe")
        await engine.close()
        return key

    key = run(body())
    assert probe.seen == [scope.WorkScope(key, Mode.INCOGNITO, "fake", OWNER)] * 3
