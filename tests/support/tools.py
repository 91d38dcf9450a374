"""Tools in tests: `run` (one call of a tool, run to its end) and `refusal` (the sentence a tool
refuses a call with); `SECRET`, what the `outside` fixture's file (tests/tools/conftest.py)
holds, in a folder beside the workspace no tool may read or change; and a tool a test hands
the engine, `Hook`, which runs a Python callable when the model calls it (takes the model
server down, say), with the effect it declares; `Echo`, a read-only tool that says its words
back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hearth.tools.base import Effect, Placed, Tool, ToolContext, ToolOutcome, ToolRefused

SECRET = "the secret outside TODO\n"  # TODO: what a grep would find there


def run(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """`tool` called with `args` in `ctx`, run to its end."""
    return asyncio.run(tool.run(args, ctx))


def refusal(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str:
    """The sentence `tool` refuses `args` with (fails the test if it does not refuse)."""
    with pytest.raises(ToolRefused) as caught:
        run(tool, args, ctx)
    sentence = caught.value.sentence
    assert sentence and str(caught.value) == sentence
    return sentence


class Hook:
    """A tool that runs a Python callable (e.g. takes the model server down) when called."""

    description = "Do the thing."
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    placed: Placed = "gateway"
    parallel_safe = False

    def __init__(self, effect: Effect, action: Any = None, seconds: float = 0.0) -> None:
        self.name = "hook"
        self.effect = effect
        self.action = action
        self.seconds = seconds
        self.calls = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        self.calls += 1
        if self.action is not None:
            await asyncio.to_thread(self.action)
        await asyncio.sleep(self.seconds)
        return ToolOutcome(output="done", receipt="Did the thing.")


class Echo:
    """A read-only tool that answers with what it was given."""

    name = "echo"
    description = "Say the words back."
    parameters: dict[str, Any] = {"type": "object", "properties": {"words": {"type": "string"}}}
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(output=f"echo: {args.get('words', '')}", receipt="Echoed.")
