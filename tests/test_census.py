"""Census tests: rules held over the whole source tree by walking its AST.

Each detector is proved on a planted violation first (its positive control), so a detector
that finds nothing because it is broken cannot pass silently.
"""

from __future__ import annotations

import ast

from tests.support.census import SRC, found_by

ADAPTERS = {"models/openai_compat.py", "models/anthropic_provider.py"}
GUARD = "models/guard.py"


def model_calls_outside_the_guard(name: str, tree: ast.Module) -> list[str]:
    """Places in `name` that reach a model other than through `guard.stream`."""
    if name in ADAPTERS or name == GUARD:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            is_guard = isinstance(owner, ast.Name) and owner.id == "guard"
            if node.func.attr == "stream" and not is_guard and _looks_like_provider(owner):
                found.append(f"{name}:{node.lineno} calls .stream() on a provider directly")
            if node.func.attr == "create" and "completions" in ast.unparse(owner):
                found.append(f"{name}:{node.lineno} calls a chat-completions API directly")
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""]
            for module in modules:
                if module.split(".")[0] in ("openai", "anthropic"):
                    found.append(f"{name}:{node.lineno} imports the {module} SDK")
    return found


def _looks_like_provider(owner: ast.expr) -> bool:
    return "provider" in ast.unparse(owner).lower()


def test_detector_finds_a_planted_direct_model_call() -> None:
    planted = ast.parse(
        "import openai\n"
        "async def sneak(turn, request):\n"
        "    async for event in turn.provider.stream(request):\n"
        "        yield event\n"
        "    await client.chat.completions.create(model='x', messages=[])\n"
    )
    found = model_calls_outside_the_guard("engine/sneak.py", planted)
    assert len(found) == 3, found


def test_every_model_call_goes_through_the_guard() -> None:
    assert found_by(model_calls_outside_the_guard) == []


def guard_calls_without_a_purpose(name: str, tree: ast.Module) -> list[str]:
    """`guard.stream(...)` calls that do not name their purpose (the per-call record's word
    for what the call was for), so no call is recorded as nothing in particular."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "stream" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "guard"
                and not any(k.arg == "purpose" for k in node.keywords)):
            found.append(f"{name}:{node.lineno} calls guard.stream() without purpose=")
    return found


def test_detector_finds_a_guard_call_without_a_purpose() -> None:
    planted = ast.parse(
        "async def sneak(provider, request):\n"
        "    async for event in guard.stream(provider, request):\n"
        "        yield event\n"
        "    async for event in guard.stream(provider, request, purpose='turn'):\n"
        "        yield event\n"
    )
    assert len(guard_calls_without_a_purpose("engine/sneak.py", planted)) == 1


def test_every_guarded_call_names_its_purpose() -> None:
    assert found_by(guard_calls_without_a_purpose) == []


def test_the_guard_records_every_stream_it_opens() -> None:
    """The guard's stream ends in a `finally` that hands the call to the recorder, so a call
    ended by an error or a cancellation is recorded as one that finished is."""
    tree = ast.parse((SRC / GUARD).read_text())
    recorded = next(n for n in ast.walk(tree)
                    if isinstance(n, ast.AsyncFunctionDef) and n.name == "_recorded")
    tries = [n for n in ast.walk(recorded) if isinstance(n, ast.Try) and n.finalbody]
    assert tries and any("_ended(" in ast.unparse(t.finalbody) for t in tries)
    assert "async for event in events" in ast.unparse(tries[0].body)


def test_the_guard_is_what_the_loop_calls() -> None:
    loop = (SRC / "engine" / "turn" / "loop.py").read_text()
    assert "guard.stream(" in loop


PROMISES = {"record_started", "admit", "take_back", "finish", "insert"}


def promises_written_without_sync(name: str, tree: ast.Module) -> list[str]:
    """A `with db.write(durable=False)` block that writes a promise (a message admitted, a
    call recorded started, a recovery attempt counted, an ending)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        for item in node.items:
            call = item.context_expr
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "write"):
                continue
            lax = any(k.arg == "durable" and isinstance(k.value, ast.Constant)
                      and k.value.value is False for k in call.keywords)
            if not lax:
                continue
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                        and inner.func.attr in PROMISES):
                    found.append(f"{name}:{inner.lineno} writes {inner.func.attr} unsynced")
    return found


def test_detector_finds_a_promise_written_without_sync() -> None:
    planted = ast.parse(
        "def f(turn, conn):\n"
        "    with turn.db.write(durable=False) as conn:\n"
        "        ledger.record_started(conn, run_id='r')\n"
    )
    assert len(promises_written_without_sync("engine/x.py", planted)) == 1


def test_every_promise_is_synced_before_it_is_relied_on() -> None:
    assert found_by(promises_written_without_sync) == []
