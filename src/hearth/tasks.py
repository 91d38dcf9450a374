"""Ending asyncio tasks: the one way Hearth cancels its own tasks and waits for them to end.

`cancel_and_wait` cancels every task given, then waits until each has ended (its `finally`
blocks run), so whoever stops a loop of work knows it stopped. A task's own CancelledError is
its ending, not the caller's; a cancel of the caller itself while it waits still reaches the
caller (the copies this replaced, `with contextlib.suppress(asyncio.CancelledError): await
task`, swallowed that one too). A task that ended by raising something else raises it here,
once every task has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel each task (None: nothing to end) and wait until all have ended."""
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    if not live:
        return
    await asyncio.wait(live)
    failed = [task.exception() for task in live if not task.cancelled()]
    for error in failed:
        if error is not None:
            raise error
