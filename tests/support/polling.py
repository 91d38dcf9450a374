"""Waiting for something a gateway does in its own time: `until` polls a check until it gives
something true and hands that back, or fails the test after its timeout, saying what it
waited for."""

from __future__ import annotations

import time
from collections.abc import Callable
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
