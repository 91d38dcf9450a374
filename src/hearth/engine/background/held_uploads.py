"""Uploads never sent are removed: an attachment uploaded to a chat that no message sent
within `[attachments] held_seconds` (a day by default) goes, its row and, when no other row of
its chat keeps the same bytes, its file (`engine.attachments.expire`). A sent file is never
touched, nor the bytes a held upload shares with one.

`sweep_forever` (started on the leader with the engine's other sweepers, stopped at close)
looks every quarter of `held_seconds`, at most every `EVERY_AT_MOST` seconds, so an upload
goes at most that long after its time, by the `Clock` it is given. It logs how many went,
never their names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock
from hearth.config import AttachmentsConfig

log = logging.getLogger(__name__)

EVERY_AT_MOST = 600.0  # seconds between two looks, whatever held_seconds says
EVERY_AT_LEAST = 0.2


class Expiring(Protocol):
    """What the sweep needs of the attachments' desk."""

    async def expire(self, before: float) -> int: ...


def interval(held_seconds: float) -> float:
    """Seconds between two looks for uploads past `held_seconds`."""
    return min(EVERY_AT_MOST, max(EVERY_AT_LEAST, held_seconds / 4))


async def sweep(desk: Expiring, held_seconds: float, now: float | None = None) -> int:
    """Remove the uploads held longer than `held_seconds` at `now` (default: now); how many."""
    return await desk.expire((time.time() if now is None else now) - held_seconds)


async def sweep_forever(desk: Expiring, settings: Callable[[], AttachmentsConfig],
                        clock: Clock) -> None:
    """Look for uploads never sent every so often, for as long as the engine runs (each look
    reads `held_seconds` anew: a settings change applies to the next)."""
    while True:
        held_seconds = settings().held_seconds
        await clock.sleep(interval(held_seconds))
        try:
            removed = await sweep(desk, held_seconds, clock.now())
        except (SQLAlchemyError, OSError) as error:  # the store or the disk is away: next time
            log.warning("the sweep of uploads never sent failed (%s); trying again later",
                        type(error).__name__)
            continue
        if removed:
            log.info("removed %d upload(s) never sent within %g seconds", removed,
                     held_seconds)
