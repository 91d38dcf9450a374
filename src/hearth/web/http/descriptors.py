"""The gateway's open files (descriptors): its soft limit raised to the hard one at start
(`raise_limit`, called where the server is made), how many are open now (`open_count`, from
`/proc/self/fd`, read off the loop by `reserve_refusal`), and the one decision whether an app's
new request falls inside the reserve kept for the owner (`in_reserve`).

Every connection and every event stream holds a file; an app that opened enough of them would
leave none for `/healthz` or the owner's own turn. So while open files are within
`[apps] fd_reserve` of the soft limit, an app's request is refused (503 `gateway_busy`, with
`Retry-After`); the owner's requests and `/healthz` never ask here.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource

from hearth.errors import Limited

log = logging.getLogger(__name__)

FD_DIR = "/proc/self/fd"
UNLIMITED_TARGET = 65_536  # the soft limit asked for when the hard one is unlimited
RETRY_SECONDS = 5
FULL = (errno.EMFILE, errno.ENFILE)  # no file to spare: even the count cannot be read


def raise_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard one; (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            log.warning("the limit on open files stays %d (raising it to %d failed: %s)",
                        soft, target, error)
            return soft, soft
        log.info("open files: the soft limit was raised from %d to %d", soft, target)
        return soft, target
    return soft, soft


def soft_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_count() -> int | None:
    """Open files now (blocking: call it off the loop); None where it cannot be known."""
    try:
        return len(os.listdir(FD_DIR))
    except OSError as error:
        return soft_limit() if error.errno in FULL else None


def in_reserve(open_files: int | None, soft: int, reserve: int) -> bool:
    """Whether `open_files` is within `reserve` of the soft limit (never when unknown)."""
    if open_files is None or soft == resource.RLIM_INFINITY:
        return False
    return open_files >= soft - reserve


async def reserve_refusal(app: str, reserve: int) -> Limited | None:
    """The refusal of an app's request while open files are within the owner's reserve."""
    if reserve <= 0:
        return None
    count, soft = await asyncio.to_thread(open_count), soft_limit()
    if not in_reserve(count, soft, reserve):
        return None
    return Limited("gateway_busy", 503,
                   f"The gateway has {count} of its {soft} open files in use, within the "
                   f"{reserve} kept for its owner (`fd_reserve` under [apps] in config.toml), "
                   f"so it takes no new request from the app {app!r} now; try again in "
                   f"{RETRY_SECONDS} seconds, or close some of its event streams.",
                   RETRY_SECONDS)
