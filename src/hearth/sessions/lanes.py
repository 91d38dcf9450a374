"""Lanes: each session's runs one at a time, in order, under a global bound.

The queue itself is durable (a session's admitted runs in the store); a lane is only the task
that drains it. `dispatch` wakes a session's lane; the lane asks `run_next` to take and run the
session's oldest admitted run until none is left. The global lane bounds how many turns run at
once across all sessions of this gateway.

Across gateways (PostgreSQL's replicas) the store's claim keeps the order: `run_next` answers
None when another gateway's turn holds the chat, and the lane waits, outside the global bound,
until it is woken (`dispatch`: that turn's end was heard) or `BUSY_POLL_SECONDS` pass, then
looks again. That pause waits on the `Clock` the lanes are given (the system's unless a test
hands them a fake one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from hearth.clock import Clock, SystemClock
from hearth.tasks import cancel_and_wait

RunNext = Callable[[str], Awaitable[bool | None]]  # ran one | none waits | None: held elsewhere
Parked = Callable[[], int]  # how many running lanes only wait for the owner's answer
BUSY_POLL_SECONDS = 2.0
PARKED_POLL_SECONDS = 0.05  # how often a stop looks again at what still runs


class Lanes:
    def __init__(self, max_concurrent: int, run_next: RunNext,
                 clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._global = asyncio.Semaphore(max_concurrent)
        self._run_next = run_next
        self._drainers: dict[str, asyncio.Task[None]] = {}
        self._woken: set[str] = set()
        self._wakers: dict[str, asyncio.Event] = {}  # lanes waiting on another gateway's turn
        self._closed = False

    def dispatch(self, session_key: str) -> None:
        """Make sure the session's lane is draining its queue (idempotent)."""
        if self._closed:
            return
        self._woken.add(session_key)
        waker = self._wakers.get(session_key)
        if waker is not None:
            waker.set()
        task = self._drainers.get(session_key)
        if task is None or task.done():
            self._drainers[session_key] = asyncio.get_running_loop().create_task(
                self._drain(session_key), name=f"lane:{session_key}"
            )

    def busy(self, session_key: str) -> bool:
        task = self._drainers.get(session_key)
        return task is not None and not task.done()

    async def _drain(self, session_key: str) -> None:
        try:
            while not self._closed:
                self._woken.discard(session_key)
                async with self._global:
                    took = await self._run_next(session_key)
                if took is None:
                    await self._held_elsewhere(session_key)
                elif not took and session_key not in self._woken:
                    return
        finally:
            if self._drainers.get(session_key) is asyncio.current_task():
                del self._drainers[session_key]

    async def _held_elsewhere(self, session_key: str) -> None:
        """Until woken, or the poll's pause: another gateway's turn holds the chat."""
        waker = self._wakers.setdefault(session_key, asyncio.Event())
        try:
            if session_key not in self._woken:
                await self._clock.wait(waker, BUSY_POLL_SECONDS)
        finally:
            self._wakers.pop(session_key, None)

    async def close(self, grace: float = 0.0, parked: Parked = lambda: 0) -> None:
        """Take no more runs; let the running ones finish within `grace` seconds, then cancel
        them (their runs stay in the store, to be resumed). The grace ends early once every
        lane still running holds a turn that only waits for the owner (`parked`: how many):
        waiting longer would change nothing."""
        self._closed = True
        tasks = list(self._drainers.values())
        deadline = asyncio.get_running_loop().time() + grace
        pending = {task for task in tasks if not task.done()}
        while pending and len(pending) > parked():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=min(left, PARKED_POLL_SECONDS))
        await cancel_and_wait(*tasks)
