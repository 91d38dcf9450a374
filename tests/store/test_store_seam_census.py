"""Census: nothing on the event loop waits on SQLite.

Code in an `async def` reaches the store only by awaiting the seam (`db.reading`,
`db.writing`) or by handing a whole blocking routine to a thread (`asyncio.to_thread`). Two
checks hold that rule:

- statically, no `async def` in the package opens a blocking transaction (`with db.read()`,
  `with db.write()`) or passes the database handle to a plain, un-awaited call (a blocking
  helper such as `chats.get_chat(engine.db, key)`), with a planted positive control;
- at run time, the blocking calls themselves raise `BlockingOnLoop` on a thread that runs an
  event loop, so a path the static check cannot see (a helper's helper) fails in every test
  that takes it.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from hearth.store.db import BlockingOnLoop, Database
from tests.support.census import sources
from tests.support.store import migrated

HANDLES = ("db", "_db")  # what the database handle is called, bare or as an attribute
SEAM = ("reading", "writing")
OFF_LOOP = ("to_thread", "run_in_executor")


def _is_handle(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in HANDLES
    return isinstance(node, ast.Attribute) and node.attr in HANDLES


def _own_nodes(fn: ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of this coroutine's own body: nested functions and lambdas are not run on
    the loop by being written here (they are handed to the seam or a thread)."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _awaited_or_handed_off(fn: ast.AsyncFunctionDef) -> set[int]:
    """ids of calls that are awaited, or are the seam/thread hand-off itself."""
    ok: set[int] = set()
    for node in _own_nodes(fn):
        if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
            ok.add(id(node.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in SEAM + OFF_LOOP or node.func.attr == "create_task"):
            ok.add(id(node))
            ok.update(id(a) for a in node.args if isinstance(a, ast.Call))
    return ok


def async_generators(tree: ast.Module) -> set[str]:
    """Names of the async generator functions defined in `tree`: calling one runs nothing (its
    body runs as it is iterated, on the loop, where the census reads it as its own function)."""
    return {fn.name for fn in ast.walk(tree) if isinstance(fn, ast.AsyncFunctionDef)
            and any(isinstance(n, ast.Yield | ast.YieldFrom) for n in _own_nodes(fn))}


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def blocking_on_loop(name: str, tree: ast.Module,
                     generators: frozenset[str] = frozenset()) -> list[str]:
    found = []
    generators = generators | async_generators(tree)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.AsyncFunctionDef):
            continue
        ok = _awaited_or_handed_off(fn)
        for node in _own_nodes(fn):
            if not isinstance(node, ast.Call) or id(node) in ok or _callee(node) in generators:
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("read", "write") \
                    and _is_handle(func.value):
                found.append(f"{name}:{node.lineno} {fn.name} opens db.{func.attr}()")
            elif any(_is_handle(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                found.append(f"{name}:{node.lineno} {fn.name} hands the database to "
                             f"{ast.unparse(func)}() on the loop")
    return sorted(found, key=lambda f: (f.split(" ")[0].rsplit(":", 1)[0],
                                        int(f.split(" ")[0].rsplit(":", 1)[1])))


PLANTED = '''
async def route(engine):
    with engine.db.read() as conn:
        pass
    row = chats.get_chat(engine.db, "k")
    fine = await engine.db.reading(get, "k")
    also = await asyncio.to_thread(chats.get_chat, engine.db, "k")
    def inner(conn):
        return chats.get_chat(engine.db, "k")
    lines = [line async for line in pages(engine.db)]
    return row


async def pages(db):
    yield await db.reading(get, "k")
'''


def test_census_detector_finds_the_planted_blocking_calls() -> None:
    found = blocking_on_loop("planted.py", ast.parse(PLANTED))
    assert [f.split(" ", 1)[0] for f in found] == ["planted.py:3", "planted.py:5"]


def test_census_no_async_def_blocks_on_the_store() -> None:
    trees = sources()
    generators = frozenset(n for tree in trees.values() for n in async_generators(tree))
    violations = []
    for name, tree in trees.items():
        violations += blocking_on_loop(name, tree, generators)
    assert violations == []


def test_blocking_calls_refuse_the_loop_thread(tmp_path: Path) -> None:
    db = migrated(tmp_path, "h.db")

    async def on_loop() -> None:
        with pytest.raises(BlockingOnLoop, match=r"await db\.writing"):
            with db.write():
                pass
        with pytest.raises(BlockingOnLoop, match=r"await db\.reading"):
            with db.read():
                pass
        await asyncio.to_thread(_blocking_read, db)  # a thread may block

    try:
        asyncio.run(on_loop())
    finally:
        db.close()


def _blocking_read(db: Database) -> None:
    with db.read() as conn:
        conn.exec_driver_sql("SELECT 1")
