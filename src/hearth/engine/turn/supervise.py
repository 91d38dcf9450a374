"""Supervision of a running turn: Stop, the turn time limit, and the idle limit of a turn
nobody is watching.

The loop runs as its own task; the supervisor waits on it and ends it from outside when one
of those says so. What the ended turn had streamed is kept, marked partial, and every call it
had begun is answered (a call cut short may or may not have taken effect: `unknown`). A
cancellation from outside the turn (the gateway stopping) leaves the run to be resumed: its
streamed text is checkpointed first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

from hearth.engine.turn import endings, loop, recovery
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.turn_state import Turn
from hearth.tasks import cancel_and_wait

TICK_SECONDS = 0.5
UNATTENDED_KINDS = ("job", "helper", "api")
STOPPED_CALL = ("This call was stopped before it finished. It may or may not have taken "
                "effect.")
NOT_RUN_STOPPED = "This call was not run: the turn was stopped first."


class ActiveTurns:
    """The turns running in this process, by chat: what Stop reaches."""

    def __init__(self) -> None:
        self._turns: dict[str, tuple[Turn, asyncio.Task[Ending]]] = {}

    def stop(self, session_key: str) -> str | None:
        """Stop the chat's running turn at once; its run id, or None if none runs."""
        entry = self._turns.get(session_key)
        if entry is None:
            return None
        turn, task = entry
        turn.halt = turn.halt or "stopped"
        task.cancel()
        return turn.run_id

    def running(self) -> int:
        return len(self._turns)

    def parked(self) -> int:
        """How many of the turns running here only wait for the owner's answer."""
        return sum(1 for turn, _ in self._turns.values() if turn.parked)

    def turn_of(self, session_key: str) -> Turn | None:
        """The chat's turn running in this process, if any (what a message sent now steers)."""
        entry = self._turns.get(session_key)
        return entry[0] if entry is not None else None

    async def supervise(self, turn: Turn, work: Coroutine[Any, Any, Ending]) -> Ending:
        task = asyncio.create_task(work, name=f"turn:{turn.run_id}")
        self._turns[turn.session_key] = (turn, task)
        try:
            return await _watch(turn, task)
        finally:
            self._turns.pop(turn.session_key, None)


async def _watch(turn: Turn, task: asyncio.Task[Ending]) -> Ending:
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=TICK_SECONDS)
            if not task.done() and turn.halt is None:
                turn.halt = _overdue(turn)
                if turn.halt is not None:
                    task.cancel()
    except asyncio.CancelledError:  # the gateway is stopping: leave the run to be resumed
        await cancel_and_wait(task)
        if turn.streamed:
            await loop.checkpoint(turn)
        raise
    if not task.cancelled():
        return task.result()
    return await _ended_from_outside(turn)


def _time_limit(turn: Turn) -> float:
    """The run time the turn was stopped at: the turn limit, or a helper's if sooner."""
    limits = turn.limits
    if turn.run.kind == "helper":
        return min(limits.helper_seconds, limits.turn_timeout_seconds or limits.helper_seconds)
    return limits.turn_timeout_seconds


def _overdue(turn: Turn) -> str | None:
    limits = turn.limits
    now = time.monotonic()
    if limits.turn_timeout_seconds and now - turn.started > limits.turn_timeout_seconds:
        return "time"
    if turn.run.kind == "helper" and now - turn.started > limits.helper_seconds:
        return "time"
    idle = 0.0 if turn.tools_running else now - turn.last_progress
    if turn.run.kind in UNATTENDED_KINDS and idle > limits.unattended_idle_seconds:
        return "idle"
    return None


async def _ended_from_outside(turn: Turn) -> Ending:
    await loop.keep_partial(turn, turn.halt or "stopped")
    await recovery.answer_open_calls(turn, unknown=STOPPED_CALL, not_run=NOT_RUN_STOPPED)
    if turn.halt == "time":
        return endings.time_limit(_time_limit(turn))
    if turn.halt == "idle":
        return endings.idle(turn.limits.unattended_idle_seconds / 60, turn.tool_calls)
    return endings.stopped()
