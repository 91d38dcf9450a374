"""Named crash and failure points for the tests: inert unless HEARTH_CRASH_AT or
HEARTH_FAIL_AT names one.

`crash_point("tool_ran")` ends the process at once (`os._exit`, no cleanup, no flush) when
`HEARTH_CRASH_AT=tool_ran` is set; otherwise it does nothing. The engine passes each point at
the moment its name says, so a test can kill the gateway exactly there and check what a
restart makes of it.

`fail_point("purge_folder")` raises `OSError` when `HEARTH_FAIL_AT=purge_folder` is set (and
does nothing otherwise): the step that follows fails the way a disk or a permission would make
it fail, so a test can check what the gateway says and keeps. The process goes on. Both
variables are read at each point, never cached.
"""

from __future__ import annotations

import errno
import os

ENV = "HEARTH_CRASH_AT"
FAIL_ENV = "HEARTH_FAIL_AT"
EXIT_CODE = 97

POINTS = {
    "admitted": "after a message and its run are committed, before the acknowledgement",
    "queued": "after a message is admitted behind a running turn",
    "run_start": "after a run is marked running and holds its chat",
    "mid_stream": "after the first piece of an answer has streamed",
    "tools_requested": "after the model's tool calls are recorded, before any ran",
    "tool_ran": "after a tool ran, before its call is recorded finished",
    "tool_recorded": "after a tool call is recorded finished",
    "steer_taken": "after a running turn took a message sent into it, before the model read it",
    "answer_persisted": "after the final answer is appended, before the run is marked done",
    "channel_admitted": "after a channel's message is admitted with its cursor, before a reply",
    "delivery_sent": "after a channel took a message, before the ledger records it sent",
    "backup_archiving": "after a backup's archive holds its database, before its other files",
}


def crash_point(name: str) -> None:
    """Die here, at once, if HEARTH_CRASH_AT names this point."""
    if name not in POINTS:
        raise ValueError(f"unknown crash point {name!r}")
    if os.environ.get(ENV) == name:
        os._exit(EXIT_CODE)


FAIL_POINTS = {
    "purge_folder": "before a deleted chat's working folder is removed",
}


def fail_point(name: str) -> None:
    """Fail here with OSError if HEARTH_FAIL_AT names this point."""
    if name not in FAIL_POINTS:
        raise ValueError(f"unknown failure point {name!r}")
    if os.environ.get(FAIL_ENV) == name:
        raise OSError(errno.EIO, f"failure injected at {name} ({FAIL_ENV})")
