"""Census: the surfaces (web/, channels/, cli.py) reach the engine through its facade
(`engine.reads`, `engine.chats`, `engine.jobs`, `engine.access`, `engine.memory_desk`,
`engine.files` and the engine's own methods), never through the store handle or the turn's
deps: no attribute `.db` or `.deps` is read anywhere in them. And web never hands an engine
or memory function to `asyncio.to_thread`: the facade is awaited as it is (the one thread web
keeps for itself counts its open files, `web/http/descriptors.py`).

Each detector is proved on a planted violation first (its positive control)."""

from __future__ import annotations

import ast

from tests.support.census import found_by

SURFACES = ("web/", "channels/")
SURFACE_MODULES = {"cli.py"}
HANDLES = {"db", "deps"}  # the store handle, the turn's deps (the store and models within)
OWN_THREADS = {"web/http/descriptors.py"}  # web's own file work, not the engine's


def is_surface(name: str) -> bool:
    return name.startswith(SURFACES) or name in SURFACE_MODULES


def handles_reached(name: str, tree: ast.Module) -> list[str]:
    """Places in a surface module that read `.db` or `.deps` of anything."""
    if not is_surface(name):
        return []
    return [f"{name}:{node.lineno} reads .{node.attr} ({ast.unparse(node)})"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in HANDLES]


def threads_in_web(name: str, tree: ast.Module) -> list[str]:
    """Places in web/ that call `asyncio.to_thread` (or a bare `to_thread`)."""
    if not name.startswith("web/") or name in OWN_THREADS:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called == "to_thread":
            found.append(f"{name}:{node.lineno} calls {ast.unparse(func)}")
    return found


PLANTED = (
    "async def sneak(request, engine):\n"
    "    row = await chats.get_chat(engine.db, 'k')\n"
    "    x = request.app.state.engine.deps.x\n"
    "    items = await asyncio.to_thread(engine.memory.items, limit=5)\n"
    "    return await to_thread(jobs.listing, None)\n"
)


def test_detector_finds_a_planted_store_handle() -> None:
    found = handles_reached("web/pages/sneak.py", ast.parse(PLANTED))
    assert len(found) == 2, found
    assert any("engine.db" in f for f in found)
    assert any("request.app.state.engine.deps" in f for f in found)
    assert handles_reached("channels/sneak.py", ast.parse(PLANTED))
    assert handles_reached("cli.py", ast.parse(PLANTED))
    assert handles_reached("engine/sneak.py", ast.parse(PLANTED)) == []  # the engine's own


def test_detector_finds_a_planted_thread_in_web() -> None:
    assert len(threads_in_web("web/api/sneak.py", ast.parse(PLANTED))) == 2
    assert threads_in_web("web/http/descriptors.py", ast.parse(PLANTED)) == []


def test_no_surface_reaches_the_store_handle_or_the_deps() -> None:
    assert found_by(handles_reached) == []


def test_web_awaits_the_facade_instead_of_threading_engine_work() -> None:
    assert found_by(threads_in_web) == []
