"""A clock whose timers run only when the test says: `FakeClock`, a `hearth.clock.Clock`.

Handed to an engine (`make_engine(..., clock=)`) or an in-process gateway
(`gateway_factory(clock=)`), it holds every timed loop's pause (the scheduler's tick, the
sweepers, the lanes' wait on another gateway) until the test calls `advance(seconds)`:
each sleeper due by then wakes, in the order of its due time, and `advance` returns only
once each has run on to its next pause on this clock (or ended). So "nothing fired" is
asserted after the loops have really looked, without sleeping to give them the chance.

Its readings are the real clock's plus what was advanced: never behind the stamps the
store writes by the real clock, so a row written a moment ago is never in the clock's
future. `advance` is called from a thread that does not run the engine's loop (a test
beside an in-process gateway); a test on the engine's own loop awaits `advance_here`.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

SETTLE_SECONDS = 15.0  # a woken loop not back at its pause by then fails the test
LOOK_EVERY = 0.002  # how often advance looks whether the woken loops are back


@dataclass(order=True)
class _Sleeper:
    due: float  # on the advanced axis: what `advanced` must reach
    order: int
    future: asyncio.Future[None] = field(compare=False)
    task: asyncio.Task[Any] | None = field(compare=False)


class FakeClock:
    """Real readings plus what was advanced; pauses that end only by `advance`."""

    def __init__(self) -> None:
        self.advanced = 0.0  # seconds advanced so far
        self._lock = threading.Condition()
        self._sleepers: list[_Sleeper] = []
        self._order = itertools.count()

    # ------------------------------------------------------------------ the Clock

    def now(self) -> float:
        return time.time() + self.advanced

    def monotonic(self) -> float:
        return time.monotonic() + self.advanced

    async def sleep(self, seconds: float) -> None:
        sleeper = self._sleep_on(seconds)
        try:
            await sleeper.future
        finally:
            self._forget(sleeper)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        sleeper = self._sleep_on(timeout)
        setting = asyncio.ensure_future(event.wait())
        try:
            either: set[asyncio.Future[Any]] = {setting, sleeper.future}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            setting.cancel()
            self._forget(sleeper)
        return event.is_set()

    # ------------------------------------------------------------------ the test's side

    def sleeping(self) -> int:
        """How many pauses wait on this clock now."""
        with self._lock:
            return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass, from a thread that does not run the loops' event loop."""
        for woken in self._steps(seconds):
            self._settle_from_thread(woken)

    async def advance_here(self, seconds: float) -> None:
        """Let `seconds` pass, from a task on the loops' own event loop."""
        for woken in self._steps(seconds):
            deadline = time.monotonic() + SETTLE_SECONDS
            while not self._settled(woken):
                self._check(deadline, woken)
                await asyncio.sleep(LOOK_EVERY)

    def paused(self, name: str) -> bool:
        """Whether the task named `name` waits on this clock now (its loop has looked)."""
        return any(s.task is not None and s.task.get_name() == name for s in self._pausing())

    async def until_paused(self, name: str) -> None:
        """Until the task named `name` waits on this clock, from a task on its loop."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while not self.paused(name):
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} never paused on the clock")
            await asyncio.sleep(LOOK_EVERY)

    # ------------------------------------------------------------------ inside

    def _pausing(self) -> list[_Sleeper]:
        with self._lock:
            return list(self._sleepers)

    def _sleep_on(self, seconds: float) -> _Sleeper:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        with self._lock:
            sleeper = _Sleeper(self.advanced + max(0.0, seconds), next(self._order),
                               loop.create_future(), task)
            self._sleepers.append(sleeper)
            self._lock.notify_all()
        return sleeper

    def _forget(self, sleeper: _Sleeper) -> None:
        with self._lock:
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)
            self._lock.notify_all()

    def _steps(self, seconds: float) -> Iterator[list[_Sleeper]]:
        """Move on to each due time up to `seconds` from now in turn, waking its sleepers;
        yields each step's woken, for the caller to wait on before the next step (a woken
        loop sleeps again, maybe to wake within the same advance)."""
        target = self.advanced + seconds
        while (woken := self._wake_next(target)):
            yield woken
        with self._lock:
            self.advanced = max(self.advanced, target)

    def _wake_next(self, target: float) -> list[_Sleeper]:
        """The sleepers of the earliest due time by `target`, woken, the clock moved there."""
        with self._lock:
            due = [s for s in self._sleepers if s.due <= target and not s.future.done()]
            if not due:
                return []
            at = min(due).due
            woken = [s for s in due if s.due == at]
            self.advanced = max(self.advanced, at)
            for sleeper in woken:
                self._sleepers.remove(sleeper)
        for sleeper in woken:
            sleeper.future.get_loop().call_soon_threadsafe(_end, sleeper.future)
        return woken

    def _settled(self, woken: list[_Sleeper]) -> bool:
        """Whether each woken sleeper heard it and its task is at a pause on this clock
        again, or ended."""
        pausing = {s.task for s in self._pausing()}
        return all(s.future.done() and (s.task is None or s.task.done() or s.task in pausing)
                   for s in woken)

    def _settle_from_thread(self, woken: list[_Sleeper]) -> None:
        deadline = time.monotonic() + SETTLE_SECONDS
        with self._lock:  # re-entrant: _settled takes it again
            while not self._settled(woken):
                self._check(deadline, woken)
                self._lock.wait(LOOK_EVERY * 5)

    def _check(self, deadline: float, woken: list[_Sleeper]) -> None:
        if time.monotonic() > deadline:
            names = [s.task.get_name() if s.task is not None else "?" for s in woken]
            raise AssertionError(f"woken loops not back at a pause after {SETTLE_SECONDS} s: "
                                 f"{names}")


def _end(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
