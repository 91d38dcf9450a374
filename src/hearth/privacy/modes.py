"""Memory modes and the one reader of a session's mode.

persistent: memory is read and written. incognito: read, never written. temporary: neither
read nor written, and the chat is forgotten when it ends. unreadable: a mode nothing can say
(a value this build does not know, a record that cannot be read) — treated as temporary, and
its refusals say the chat's setting cannot be read. Every check asks `mode_of`, which fails
closed: only a mode known to be persistent keeps memory.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    PERSISTENT = "persistent"
    INCOGNITO = "incognito"
    TEMPORARY = "temporary"
    UNREADABLE = "unreadable"


def mode_of(recorded: object) -> Mode:
    """The mode a recorded value means; anything not exactly known is UNREADABLE."""
    if isinstance(recorded, str):
        try:
            return Mode(recorded)
        except ValueError:
            return Mode.UNREADABLE
    return Mode.UNREADABLE


def keeps_memory(mode: Mode) -> bool:
    """May work in this mode write memory? Only persistent work may."""
    return mode is Mode.PERSISTENT


def reads_memory(mode: Mode) -> bool:
    """May work in this mode read memory? Persistent and incognito work may."""
    return mode in (Mode.PERSISTENT, Mode.INCOGNITO)


def restricted(mode: Mode) -> bool:
    """Kept out of lists, search and background chores: every mode but persistent."""
    return mode is not Mode.PERSISTENT
