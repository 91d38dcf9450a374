"""The one clock the gateway's timed loops read and wait on: `Clock`, and `SystemClock`.

What waits for time to pass on its own (the scheduler's ticks, the sweepers, a replica's
look for the dead, a lane waiting on another gateway's turn, the owed chores' naps) takes a
`Clock` as a constructor argument, the system's by default, so a test can hand it a fake
one (tests/support/clock.py's `FakeClock`) and make time pass by advancing it instead of
sleeping. A clock reads the wall time (`now`, UNIX seconds) and a monotonic one, sleeps,
and waits for an event with a timeout. It calls nothing of the gateway.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """What a timed loop reads and waits on."""

    def now(self) -> float:
        """The wall time, in UNIX seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for spans, not for stamps)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` have passed."""
        ...

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Until `event` is set or `timeout` seconds pass; whether it was set."""
        ...


class SystemClock:
    """The real clock: `time` and the running loop's timers."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        return True
