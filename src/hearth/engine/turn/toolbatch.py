"""Running one batch of tool calls the model asked for.

Each call is written to the ledger as `started` before its tool runs and as finished or failed
after. A batch runs in parallel only when every tool in it allows that; its results are
appended in the model's call order, whatever order they finish in.

`run_call` is the one way any tool call runs (a turn's batch, an agent CLI's call through
`hearth mcp` in `engine/turn/agent_cli_calls.py`; MCP servers' tools and `spawn_helpers` are
tools like the rest), so it is the one masking point of tool output: what a tool answered is masked
(`hearth.masking`) before the ledger, the transcript, a model or an agent CLI sees it, and
the receipt says so when something was hidden (`MASKED`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection

from hearth.engine.observe.observer import tool_called
from hearth.engine.turn import writes
from hearth.engine.turn.approval import gate
from hearth.engine.turn.turn_state import CallScope
from hearth.faults import crash_point
from hearth.masking import mask
from hearth.models.types import Message, ToolCall
from hearth.store import ledger
from hearth.tools.base import Tool, ToolOutcome, ToolRefused, check_arguments, effect_of

log = logging.getLogger(__name__)

MASKED = "A secret in the output was masked."
OFF_LOOP_CHARS = 20_000  # longer output is masked on a thread (masking takes ~3 µs per 1,000)


async def run_batch(turn: CallScope, calls: tuple[ToolCall, ...]) -> list[Message]:
    tools = [turn.tools.get(call.name) for call in calls]
    parallel = len(calls) > 1 and all(t is not None and t.parallel_safe for t in tools)
    if parallel:
        pairs = enumerate(zip(calls, tools, strict=True))
        outcomes = list(await asyncio.gather(
            *(run_call(turn, i, call, tool) for i, (call, tool) in pairs)
        ))
    else:
        outcomes = [await run_call(turn, i, call, tool)
                    for i, (call, tool) in enumerate(zip(calls, tools, strict=True))]
    items: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    messages: list[Message] = []
    for call, outcome in zip(calls, outcomes, strict=True):
        items.append((
            "tool_result",
            {"call_id": call.call_id, "name": call.name, "output": outcome.output,
             "is_error": not outcome.ok},
            {"receipt": outcome.receipt},
        ))
        messages.append(Message("tool", outcome.output, tool_call_id=call.call_id,
                                tool_name=call.name, is_error=not outcome.ok))
    await writes.append_many(turn, items)
    return messages


async def run_call(
    turn: CallScope, position: int, call: ToolCall, tool: Tool | None
) -> ToolOutcome:
    """One call: its arguments checked, the gate passed, the ledger kept around it; counted
    by tool, the gate's decision and the ledger's status (`engine/observe`)."""
    began = time.monotonic()
    outcome, decision, status = await _gated(turn, position, call, tool)
    tool_called(tool.name if tool is not None else None, decision, status, began)
    return outcome


async def _gated(turn: CallScope, position: int, call: ToolCall,
                 tool: Tool | None) -> tuple[ToolOutcome, str, str]:
    """The call's outcome, the gate's decision (invalid: it never reached the gate) and the
    ledger's status (not_run: it never started)."""
    if tool is None:
        known = ", ".join(turn.tools.names()) or "none"
        sentence = f"There is no tool named {call.name!r}. The tools are: {known}."
        return (ToolOutcome(sentence, f"Not run: no tool named {call.name!r}.", ok=False),
                "invalid", "not_run")
    if "_invalid_json" in call.arguments:
        sentence = f"The arguments for {call.name} were not valid JSON, so it was not run."
        return (ToolOutcome(sentence, f"Not run: {call.name} had invalid arguments.",
                            ok=False), "invalid", "not_run")
    problem = check_arguments(tool.parameters, call.arguments)
    if problem:
        sentence = f"{call.name} was not run: {problem}."
        return (ToolOutcome(sentence, f"Not run: {call.name} had invalid arguments.",
                            ok=False), "invalid", "not_run")
    refused = await gate.permit(turn, position, call, tool)
    if refused is not None:
        return ToolOutcome(refused, f"Not run: {refused}", ok=False), "refused", "not_run"
    outcome, status = await _ledgered(turn, position, call, tool)
    return outcome, "allowed", status


async def _ledgered(turn: CallScope, position: int, call: ToolCall,
                    tool: Tool) -> tuple[ToolOutcome, str]:
    """Run an allowed call with the ledger kept around it: its outcome and status."""
    effect = effect_of(tool, call.arguments, turn.context)
    await turn.db.writing(_started, turn, position, call, effect)  # a promise: before it runs
    turn.tools_running += 1
    try:
        outcome, status = await _execute(turn, call, tool)
        outcome = await masked(outcome)
    finally:
        turn.tools_running -= 1
        turn.touch()
    crash_point("tool_ran")
    await turn.db.writing(_ended, turn, call, status, outcome, durable=False)
    crash_point("tool_recorded")
    return outcome, status


def _started(conn: Connection, turn: CallScope, position: int, call: ToolCall,
             effect: str) -> None:
    ledger.record_started(
        conn, run_id=turn.run_id, session_key=turn.session_key, call_id=call.call_id,
        position=position, tool=call.name, arguments=call.arguments, effect=effect)


def _ended(conn: Connection, turn: CallScope, call: ToolCall, status: str,
           outcome: ToolOutcome) -> None:
    ledger.record_ended(conn, run_id=turn.run_id, call_id=call.call_id, status=status,
                        result=outcome.output, receipt=outcome.receipt)


async def masked(outcome: ToolOutcome) -> ToolOutcome:
    """The outcome with every secret in its output and receipt masked; a long output is
    masked off the event loop."""
    if len(outcome.output) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(_masked, outcome)
    return _masked(outcome)


def _masked(outcome: ToolOutcome) -> ToolOutcome:
    output = mask(outcome.output)
    receipt = mask(outcome.receipt)
    if output != outcome.output:
        receipt = f"{receipt} {MASKED}".lstrip()
    return replace(outcome, output=output, receipt=receipt)


async def _execute(turn: CallScope, call: ToolCall, tool: Tool) -> tuple[ToolOutcome, str]:
    try:
        return await tool.run(call.arguments, turn.context), "finished"
    except ToolRefused as refusal:
        return ToolOutcome(refusal.sentence, f"Refused: {refusal.sentence}", ok=False), "failed"
    except (OSError, UnicodeError, ValueError) as exc:
        log.info("tool %s failed: %s", call.name, type(exc).__name__)
        sentence = f"{call.name} failed: {exc}"
        return ToolOutcome(sentence, sentence if sentence.endswith(".") else sentence + ".",
                           ok=False), "failed"
