"""The tool protocol: what a tool declares, what it is handed, what it answers.

A tool declares its effect class (`reads`, `changes`, `external`), how its calls are placed
(`Placed`), and whether it may run in parallel with others. It refuses what it must by
raising `ToolRefused` with a sentence that says why; the sentence reaches the model as the
call's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from hearth.tools.sandbox import Placement

Effect = Literal["reads", "changes", "external"]

# How a tool's calls are placed, which decides who can say what a call may change:
# - "gateway": the tool's own code, in the gateway, touching only what that code names (the
#   file tools within the workspace, memory, jobs): its declared effect is what it does;
# - "command": a program the model names (the shell): what it does cannot be read from its
#   text, so a call is a read only where it is placed so that it cannot change anything;
# - "remote": another program or server does the work (MCP servers, web pages): its effect
#   is what it declares, and Hearth bounds what it takes back.
Placed = Literal["gateway", "command", "remote"]
PLACED: tuple[Placed, ...] = ("gateway", "command", "remote")


class ToolRefused(Exception):
    """The tool will not do this call; `sentence` says why."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


def at_most(args: dict[str, Any], name: str, most: int) -> int:
    """The whole number argument `name` (at least 1; `most` when not given), held to `most`;
    ToolRefused for anything else."""
    asked = args.get(name)
    if asked is None:
        return most
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        raise ToolRefused(f"Refused: {name} must be a whole number of at least 1.")
    return min(asked, most)


@dataclass(frozen=True)
class WebSettings:
    """What web_fetch may reach and how much it may take."""

    allow_hosts: tuple[str, ...] = ()  # hosts reachable even on private/loopback addresses
    max_bytes: int = 2_000_000
    timeout_seconds: float = 20.0


@dataclass(frozen=True)
class ToolContext:
    workspace: Path
    session_key: str
    run_id: str
    shell_timeout: float = 60.0
    output_chars: int = 50_000
    web: WebSettings = WebSettings()
    placement: Placement = Placement()
    memory_dir: Path | None = None  # the memory documents' folder, fenced by `tools.fence`
    attachments_dir: Path | None = None  # the chat's files' folder (open_attachment)


@dataclass(frozen=True)
class ToolOutcome:
    """What the call produced (for the model) and its receipt (one sentence for a person)."""

    output: str
    receipt: str
    ok: bool = True


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]
    effect: Effect
    placed: Placed
    parallel_safe: bool

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome: ...


def effect_of(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Effect:
    """What this call may do where it will run: a tool that places calls per call (the shell
    runs a read-only call in a read-only sandbox) says so per call; otherwise its declared
    effect."""
    classify = getattr(tool, "classify", None)
    if classify is not None:
        effect: Effect = classify(args, ctx)
        return effect
    return tool.effect


def check_arguments(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """A sentence naming the first problem with `args` against a flat JSON schema, or None."""
    types: dict[str, type | tuple[type, ...]] = {
        "string": str, "integer": int, "boolean": bool, "number": (int, float),
    }
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            return f"the argument {name!r} is required"
    for name, value in args.items():
        if name not in props:
            return f"there is no argument {name!r} (it takes {', '.join(props) or 'none'})"
        expected = types.get(props[name].get("type", ""))
        if expected is not None and (
            not isinstance(value, expected)
            or (isinstance(value, bool) and props[name]["type"] != "boolean")
        ):
            return f"the argument {name!r} must be a {props[name]['type']}"
    return None
