"""Waiting for something a gateway does in its own time: `until` polls a check until it gives
something true and hands that back, or fails the test after its timeout, saying what it
waited for. And watching the event loop while something runs: `loop_lags`, how late a timer
on it fired, tick by tick (a loop that something blocks fires late)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T], timeout: float = 15.0, what: str = "") -> T:
    """Poll `check` every 0.05 s until it gives something true; that. Fail after `timeout`
    seconds, saying `what` (or naming `check`)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


@asynccontextmanager
async def loop_lags(every: float = 0.02) -> AsyncIterator[list[float]]:
    """While the block runs, a timer on the running loop every `every` seconds; the list it
    yields fills with how late each one fired."""
    lags: list[float] = []

    async def tick() -> None:
        while True:
            due = time.monotonic() + every
            await asyncio.sleep(every)
            lags.append(time.monotonic() - due)

    ticker = asyncio.create_task(tick())
    try:
        yield lags
    finally:
        ticker.cancel()
