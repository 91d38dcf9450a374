"""Census: every path that starts an agent hands its model the agent's instructions and the
safety rules. A turn (a chat's, the API's, a channel's, a job's) reads its history through
`context.build` (directly, or through `in_turn.view`), whose `system_prompt` is the system
message the model gets; each call must pass what `agents.assemble` made (which puts the safety
rules last), or be a pass-through listed here, or a chore that starts no agent (listed, with
why). A planted call with a prompt of its own is found first (the positive control).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "hearth"
BUILDERS = {"build": "context", "view": "in_turn"}  # function -> the module it is from
PASS_THROUGH = {("engine/turn/compaction/in_turn.py", "view")}  # hands its own parameter on:
# its callers are checked instead
NOT_AN_AGENT = {("engine/background/idle_summaries.py", "summarize"):
                "an idle summary is a chore: it reads the chat to summarize it, and starts no "
                "agent"}


def _prompt_argument(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "system_prompt":
            return keyword.value
    return call.args[2] if len(call.args) > 2 else None


def _is_assembled(value: ast.expr, assigned: dict[str, ast.expr]) -> bool:
    if isinstance(value, ast.Name) and value.id in assigned:
        value = assigned[value.id]
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr == "assemble" and ast.unparse(value.func.value) == "agents")


def _functions(tree: ast.AST, outer: frozenset[str] = frozenset(),
               owner: str = "") -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str,
                                               frozenset[str]]]:
    """Each function with the name it is listed by (a nested one by its outermost function's
    name) and the parameters it sees (its own and its enclosing functions')."""
    out = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            seen = outer | {a.arg for a in node.args.args + node.args.kwonlyargs}
            out.append((node, owner or node.name, seen))
            out += _functions(node, seen, owner or node.name)
        else:
            out += _functions(node, outer, owner)
    return out


def prompts_not_assembled(name: str, tree: ast.Module) -> list[str]:
    """Calls in `name` that hand a turn's history a system prompt `agents.assemble` did not
    make."""
    found = []
    for function, listed, params in _functions(tree):
        assigned = {target.id: node.value for node in ast.walk(function)
                    if isinstance(node, ast.Assign) for target in node.targets
                    if isinstance(target, ast.Name)}
        nested = {id(n) for inner in ast.walk(function) if inner is not function
                  and isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(inner)}
        for call in ast.walk(function):
            if id(call) in nested:
                continue  # checked as its own function
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and BUILDERS.get(call.func.attr) == ast.unparse(call.func.value)):
                continue
            value = _prompt_argument(call)
            place = (name, listed)
            if value is None or _is_assembled(value, assigned) or place in NOT_AN_AGENT:
                continue
            if (place in PASS_THROUGH and isinstance(value, ast.Name)
                    and value.id in params):
                continue
            found.append(f"{name}:{call.lineno} ({function.name}) passes "
                         f"system_prompt={ast.unparse(value)!r}, not agents.assemble(...)")
    return found


def test_detector_finds_a_planted_prompt_of_its_own() -> None:
    planted = ast.parse(
        "async def sneak(deps, turn):\n"
        "    prompt = 'You are a pirate.'\n"
        "    await context.build(deps.db, turn.run, system_prompt=prompt)\n"
        "    await in_turn.view(turn, deps.models, deps.config.agent.system_prompt)\n"
        "    ok = agents.assemble(told)\n"
        "    await context.build(deps.db, turn.run, system_prompt=ok)\n")
    found = prompts_not_assembled("engine/sneak.py", planted)
    assert len(found) == 2, found


def test_every_agent_start_gets_its_instructions_and_the_safety_rules() -> None:
    found = []
    calls = 0
    for path in sorted(SRC.rglob("*.py")):
        name = str(path.relative_to(SRC))
        tree = ast.parse(path.read_text(), str(path))
        found += prompts_not_assembled(name, tree)
        calls += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute)
                     and BUILDERS.get(n.func.attr) == ast.unparse(n.func.value))
    assert calls >= 4, "the census found too few calls to check: is it looking?"
    assert not found, "\n".join(found)


def test_the_listed_exceptions_still_exist() -> None:
    for name, function in (*PASS_THROUGH, *NOT_AN_AGENT):
        source = (SRC / name).read_text()
        assert f"def {function}(" in source, f"{name} has no {function}: update the census"
