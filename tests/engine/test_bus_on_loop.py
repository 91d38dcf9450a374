"""The live bus is published to only on the event loop.

`Bus.publish` puts frames on asyncio queues, which are not thread-safe: from a worker thread a
frame can reach a waiting stream late (its wake-up is scheduled on a loop not watching) and
asyncio's debug mode raises. The bus refuses a publish off the loop (`PublishedOffLoop`), the
scheduler admits a job's message on the loop, and a census walks the source for a function
handed to a thread that can reach `publish`.
"""

from __future__ import annotations

import ast
import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from hearth.engine.delivery.events import Bus, PublishedOffLoop
from hearth.store import jobs as job_store
from tests.engine_harness import make_config, make_engine
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.census import sources

T = TypeVar("T")


def test_a_publish_from_a_worker_thread_fails_loudly() -> None:
    """Before: `publish` called `put_nowait` from whatever thread it was in, silently."""

    async def scenario() -> None:
        bus = Bus()
        sub = bus.subscribe("chat")
        with pytest.raises(PublishedOffLoop, match="off the event loop"):
            await asyncio.to_thread(bus.publish, "chat", {"type": "status"})
        with pytest.raises(PublishedOffLoop):
            await asyncio.to_thread(bus.run_ended, "run-1")
        assert sub.queue.empty()
        bus.publish("chat", {"type": "status"})  # on the loop: delivered
        assert sub.queue.get_nowait() == {"type": "status"}

    asyncio.run(scenario())


def test_a_scheduled_jobs_message_reaches_a_live_stream_in_debug_mode(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """A due job fires while a stream of its chat waits on its queue, under asyncio's debug
    mode: the admitted message reaches the stream and nothing raises. Before: the scheduler
    admitted in a worker thread, so `publish` woke the waiting stream from that thread and
    debug mode raised "Non-thread-safe operation invoked on an event loop other than the
    current one" in the worker thread after the queue had taken the frame but before the
    stream's wake-up was scheduled, so the stream never woke and could not even be
    cancelled: the run hung (hence the time bound). Without debug mode the wake-up was left
    to whenever the loop next looked."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [])
    model_server.default = Reply(text="Done.")
    with engine.db.write() as conn:
        job = job_store.add(conn, prompt="Water the plants", next_at=time.time() - 5,
                            every_seconds=None, made_by="owner", principal="owner")

    async def body() -> dict[str, object]:
        await engine.start()
        try:
            await engine.scheduler.close()  # the test ticks it itself
            sub = engine.bus.subscribe(job.session_key)
            waiting = asyncio.create_task(sub.queue.get())
            await asyncio.sleep(0)  # the stream now waits on its queue
            fired = await engine.scheduler.tick()
            assert [f.job_id for f in fired if f.run_id] == [job.id]
            frame = await asyncio.wait_for(waiting, 20)  # a lost wake-up never comes: ample
            assert frame is not None
            for one in fired:
                assert one.run_id is not None
                await engine.bus.wait_run(one.run_id, 10)
            return frame
        finally:
            await engine.close()

    frame = _within(60, lambda: asyncio.run(body(), debug=True))  # debug mode on a busy CI
    assert frame["type"] == "message"
    assert frame["message"]["kind"] == "user"  # type: ignore[index]
    assert frame["message"]["text"] == "Water the plants"  # type: ignore[index]


def _within(seconds: float, work: Callable[[], T]) -> T:
    """`work()` in a thread of its own, which must finish within `seconds`."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            failed.append(error)

    worker = threading.Thread(target=run, daemon=True, name="debug-loop")
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: a wake-up was lost"
    if failed:
        raise failed[0]
    return done[0]


# ---------------------------------------------------------------- the census

LOOP_ONLY = {"publish", "delta", "run_ended"}  # the Bus's methods that wake its waiters
# method names of builtins: `x.append(...)` on an unknown receiver is taken for a list's
BUILTIN_METHODS = {name for kind in (list, dict, set, str, bytes) for name in dir(kind)} | {
    "read", "write", "close", "execute", "start", "run", "get"}


class _Module:
    """One module's functions (`f`, `Class.m`; nested functions by their own name), what each
    calls, and what its imports name: module aliases and imported functions."""

    def __init__(self, name: str, tree: ast.Module) -> None:
        self.name, self.tree = name, tree
        self.functions: dict[str, ast.AST] = {}
        self.aliases: dict[str, str] = {}  # local name -> module path (a/b.py)
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (module path, name)
        methods: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.functions[f"{node.name}.{item.name}"] = item
                        methods.add(item)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node not in methods:
                self.functions.setdefault(node.name, node)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hearth"):
                base = (node.module or "").removeprefix("hearth").strip(".").replace(".", "/")
                for alias in node.names:
                    local = alias.asname or alias.name
                    self.aliases[local] = f"{base}/{alias.name}.py".lstrip("/")
                    self.imported[local] = (f"{base}.py", alias.name)


def _receiver_class(module: _Module, func: ast.AST) -> str | None:
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ClassDef) and func in node.body:
            return node.name
    return None


def _callees(modules: dict[str, _Module], module: _Module, owner: str | None,
             func: ast.expr) -> list[tuple[str, str]]:
    """The (module, function) a call's `func` may be: resolved by name through the module's
    own functions and imports, `self.m` in the caller's class, any class's method `m` for
    an unknown receiver (not for names builtins' methods have)."""
    if isinstance(func, ast.Name):
        if func.id in module.functions:
            return [(module.name, func.id)]
        return [module.imported[func.id]] if func.id in module.imported else []
    if not isinstance(func, ast.Attribute):
        return []
    value = func.value
    if isinstance(value, ast.Name) and value.id == "self" and owner is not None:
        return [(module.name, f"{owner}.{func.attr}")]
    if isinstance(value, ast.Name) and value.id in module.aliases:
        return [(module.aliases[value.id], func.attr)]
    if func.attr in BUILTIN_METHODS - LOOP_ONLY:
        return []
    return [(m.name, key) for m in modules.values() for key in m.functions
            if key.endswith(f".{func.attr}")]


def _graph(modules: dict[str, _Module]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    graph: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for module in modules.values():
        for key, node in module.functions.items():
            owner = key.split(".")[0] if "." in key else None
            graph[(module.name, key)] = {
                callee for inner in ast.walk(node) if isinstance(inner, ast.Call)
                for callee in _callees(modules, module, owner, inner.func)}
    return graph


def _thread_targets(module: _Module) -> list[tuple[int, ast.expr, str | None]]:
    """(line, callable, enclosing class) for each callable handed to a thread:
    asyncio.to_thread(f, ...), loop.run_in_executor(executor, f, ...), Thread(target=f);
    a partial's function and a lambda's calls count as the callable."""
    found: list[tuple[int, ast.expr, str | None]] = []
    for key, node in module.functions.items():
        owner = key.split(".")[0] if "." in key else None
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name | ast.Attribute)):
                continue
            runner = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            target: ast.expr | None = None
            if runner == "to_thread" and call.args:
                target = call.args[0]
            elif runner == "run_in_executor" and len(call.args) > 1:
                target = call.args[1]
            elif runner == "Thread":
                target = next((k.value for k in call.keywords if k.arg == "target"), None)
            if isinstance(target, ast.Call) and target.args:  # functools.partial(f, ...)
                target = target.args[0]
            if isinstance(target, ast.Lambda):
                found.extend((call.lineno, inner.func, owner) for inner in ast.walk(target.body)
                             if isinstance(inner, ast.Call))
            elif target is not None:
                found.append((call.lineno, target, owner))
    return sorted(found, key=lambda t: t[0])


def publishes_from_threads(trees: dict[str, ast.Module]) -> list[str]:
    """Each callable handed to a thread that can reach one of the Bus's loop-only methods."""
    modules = {name: _Module(name, tree) for name, tree in trees.items()}
    graph = _graph(modules)
    reaching = {node for node in graph if node[1].split(".")[-1] in LOOP_ONLY
                and node[1].startswith("Bus.")}
    while more := {node for node, callees in graph.items()
                   if node not in reaching and callees & reaching}:
        reaching |= more
    found = []
    for module in modules.values():
        seen: set[tuple[int, str]] = set()
        for line, target, owner in _thread_targets(module):
            for callee in _callees(modules, module, owner, target):
                if callee in reaching and (line, callee[1]) not in seen:
                    seen.add((line, callee[1]))
                    found.append(f"{module.name}:{line} hands {callee[1]} to a thread, "
                                 "and it can publish on the bus")
    return found


def test_no_function_run_in_a_thread_can_publish_on_the_bus() -> None:
    """Before: scheduler.py handed `_admit` (which admits, which publishes) to
    asyncio.to_thread; this census named it."""
    assert publishes_from_threads(sources()) == []


def test_the_census_finds_a_planted_publish_from_a_thread() -> None:
    """Positive control: a publish two calls deep through another module, behind a method,
    a partial and a lambda; a thread that only reads is not named."""
    bus = ast.parse("class Bus:\n    def publish(self, key, frame): ...\n")
    helper = ast.parse(
        "def announce(bus, key):\n"
        "    bus.publish(key, {'type': 'status'})\n"
        "def quiet(items):\n"
        "    items.append(1)\n"
    )
    planted = ast.parse(
        "import asyncio, functools\n"
        "from hearth.engine import helper\n"
        "class Sneak:\n"
        "    def _admit(self, key):\n"
        "        helper.announce(self.bus, key)\n"
        "    async def fire(self, key):\n"
        "        await asyncio.to_thread(self._admit, key)\n"
        "        await asyncio.to_thread(functools.partial(helper.announce, None, key))\n"
        "        await asyncio.to_thread(lambda: helper.announce(None, key))\n"
        "        await asyncio.to_thread(helper.quiet, [])\n"
    )
    found = publishes_from_threads({"engine/delivery/events.py": bus, "engine/helper.py": helper,
                                    "engine/sneak.py": planted})
    assert found == [
        "engine/sneak.py:7 hands Sneak._admit to a thread, and it can publish on the bus",
        "engine/sneak.py:8 hands announce to a thread, and it can publish on the bus",
        "engine/sneak.py:9 hands announce to a thread, and it can publish on the bus",
    ]
