"""Census tests: rules held over the whole source tree by walking its AST.

Each detector is proved on a planted violation first (its positive control), so a detector
that finds nothing because it is broken cannot pass silently.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "hearth"
ADAPTERS = {"models/openai_compat.py", "models/anthropic_provider.py"}
GUARD = "models/guard.py"


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text(), str(p)) for p in SRC.rglob("*.py")}


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
    text = ast.unparse(owner).lower()
    return "provider" in text or "client" in text or "model" in text


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
    violations = [v for name, tree in _sources().items()
                  for v in model_calls_outside_the_guard(name, tree)]
    assert violations == []


def test_the_guard_is_what_the_loop_calls() -> None:
    loop = (SRC / "engine" / "loop.py").read_text()
    assert "guard.stream(" in loop
