"""Census: every tool says how its calls are placed and what they may change, and no tool
decides "reads" from the text of a command alone.

A tool placed "command" runs a program the model names; what such a program does cannot be
read from its text (variables, abbreviated options, expansions and helpers all run code), so
it may count as a read only where it is placed read-only. The detector below finds a tool
that calls a command line a read wherever it runs; its positive control is a planted tool
that screens the text, as the shell did before.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import mcp.types as mcp_types

import hearth
from hearth.tools.base import PLACED, Effect, Placed, Tool, ToolContext, ToolOutcome, effect_of
from hearth.tools.mcp_tools import McpTool
from hearth.tools.sandbox import Placement
from hearth.tools.shell import Shell
from hearth.tools.shell_screen import reads_only
from tests.engine_harness import make_config, make_engine
from tests.support.commands import DISGUISED_WRITERS

SOURCE = Path(hearth.__file__).parent
COMMAND_LINES = ["ls", "cat notes.txt", "git log", "grep -r x .", "find . -name '*.md'",
                 *DISGUISED_WRITERS]
EFFECTS = ("reads", "changes", "external")
SUBPROCESS_CALLS = {"create_subprocess_exec", "create_subprocess_shell", "Popen", "run",
                    "check_output", "call", "system"}


class _NoServers:
    async def call(self, server: str, tool: str, args: dict[str, Any]) -> Any:
        raise AssertionError("not called")


def every_tool(tmp_path: Path) -> list[Tool]:
    """Every tool a gateway offers: built in, memory, jobs, chat search, and an MCP tool."""
    engine = make_engine(tmp_path, make_config("http://127.0.0.1:9/v1"))
    tools = [engine.deps.tools.get(name) for name in engine.deps.tools.names()]
    listed = mcp_types.Tool(name="now", inputSchema={"type": "object"})
    mcp_tool = McpTool(_NoServers(), "time", listed, "time__now")
    return [*(t for t in tools if t is not None), mcp_tool]


def reads_by_text(tool: Tool, lines: list[str]) -> list[str]:
    """The command lines a command-placed tool calls reads where nothing is placed read-only
    (no sandbox, or an elevated call): a read decided from the text alone."""
    if tool.placed != "command":
        return []
    found = []
    for mode in ("off", "unavailable"):
        ctx = ToolContext(workspace=Path("/nonexistent"), session_key="k", run_id="r",
                          placement=Placement(mode))
        found += [f"{mode}: {line}" for line in lines
                  if effect_of(tool, {"command": line}, ctx) == "reads"]
    sandboxed = ToolContext(workspace=Path("/nonexistent"), session_key="k", run_id="r",
                            placement=Placement("bwrap", elevated=True))
    found += [f"elevated: {line}" for line in lines
              if effect_of(tool, {"command": line, "elevated": True}, sandboxed) == "reads"]
    return found


class _TextScreenedShell:
    """The shell as it was: a read whenever the screen says the line only reads."""

    name = "planted"
    description = "planted"
    parameters: dict[str, Any] = {"type": "object"}
    effect: Effect = "changes"
    placed: Placed = "command"
    parallel_safe = False

    def classify(self, args: dict[str, Any], ctx: ToolContext) -> Effect:
        return "reads" if reads_only(str(args.get("command", ""))) else "changes"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise AssertionError("not run")


def test_detector_finds_a_tool_that_reads_a_command_by_its_text() -> None:
    found = reads_by_text(_TextScreenedShell(), COMMAND_LINES)
    assert "off: ls" in found and "unavailable: git log" in found and "elevated: ls" in found


def test_every_tool_declares_its_placement_and_effect(tmp_path: Path) -> None:
    tools = every_tool(tmp_path)
    assert {"shell", "read_file", "grep", "web_fetch", "time__now"} <= {t.name for t in tools}
    for tool in tools:
        assert getattr(tool, "placed", None) in PLACED, tool.name
        assert tool.effect in EFFECTS, tool.name
        if tool.placed == "command":
            assert tool.effect != "reads", f"{tool.name} runs programs: never a read by default"


def test_no_tool_decides_reads_from_the_text_of_a_command(tmp_path: Path) -> None:
    tools = every_tool(tmp_path)
    assert any(t.placed == "command" for t in tools)
    for tool in tools:
        assert reads_by_text(tool, COMMAND_LINES) == [], tool.name


def test_the_shell_reads_only_where_it_is_placed_read_only() -> None:
    ctx = ToolContext(workspace=Path("/nonexistent"), session_key="k", run_id="r",
                      placement=Placement("bwrap"))
    assert effect_of(Shell(), {"command": "ls"}, ctx) == "reads"


def subprocess_in_gateway_tools(name: str, tree: ast.Module) -> list[str]:
    """A module defining a tool placed "gateway" (its own code, trusted to touch only what it
    names) that starts a program: that program is not the gateway's code."""
    placed_gateway = any(
        isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        and node.target.id == "placed" and isinstance(node.value, ast.Constant)
        and node.value.value == "gateway" for node in ast.walk(tree))
    if not placed_gateway:
        return []
    return [f"{name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in SUBPROCESS_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("subprocess", "asyncio", "os")]


def test_detector_finds_a_gateway_tool_that_starts_a_program() -> None:
    planted = ast.parse('class T:\n    placed: Placed = "gateway"\n'
                        'def f():\n    subprocess.run(["sh"])\n')
    assert subprocess_in_gateway_tools("planted.py", planted) == ["planted.py:4"]


def test_no_gateway_placed_tool_starts_a_program() -> None:
    found = [hit for path in sorted(SOURCE.rglob("*.py"))
             for hit in subprocess_in_gateway_tools(str(path.relative_to(SOURCE)),
                                                    ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []
