"""What the gateway is still starting once it serves: its optional subsystems, each on a task.

The lifespan recovers first (`Engine.start`: the runs a previous process left are settled
before anything is served, so no request ever meets a run not yet recovered), then hands the
optional subsystems to `Starting.begin` and lets the port answer at once: warming the chat
model (its SDK's import is the dearest part of a start) and the chat channels. Each starts
on a task of its own, side by side; `/healthz` lists those not finished yet (`starting`, in
the order they began; empty once all have), and one that fails is logged and leaves the
list (a channel says its own trouble in `/healthz`'s `channels`; a model that cannot be
built says it at the turn that needs it). MCP servers are not started here at all: they
start at the first turn that may use their tools. `close` ends whatever is still starting,
before the lifespan stops the rest.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from hearth.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[None]]


class Starting:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def names(self) -> list[str]:
        """What is still starting, in the order it was begun."""
        return [name for name, task in self._tasks.items() if not task.done()]

    def begin(self, steps: dict[str, Step]) -> None:
        """Start each of `steps` on a task of its own (call on the event loop)."""
        for name, step in steps.items():
            task = asyncio.create_task(_run(step), name=f"starting:{name}")
            task.add_done_callback(functools.partial(_said, name))
            self._tasks[name] = task

    async def done(self) -> None:
        """Until every step has ended, however it ended."""
        if self._tasks:
            await asyncio.wait(self._tasks.values())

    async def close(self) -> None:
        """End what is still starting (a stop during the start)."""
        await cancel_and_wait(*self._tasks.values())


async def _run(step: Step) -> None:
    await step()


def _said(name: str, task: asyncio.Task[None]) -> None:
    """Log a step that failed (its own subsystem says the rest where it is shown)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("starting %s failed", name, exc_info=task.exception())
