"""What the pages say of the two private kinds of chat, in one place: each one's name, icon,
one-line promise and the sentence behind it, as the sidebar's buttons, the new-chat page and a
chat's banner show them. The words follow what the gateway enforces (docs/memory.md, "Privacy
modes"): Incognito reads memory but never adds to it, is never listed, searched, backed up or
learned from, and is kept until deleted; Temporary neither reads nor adds to memory and is
forgotten when idle `limits.temporary_idle_seconds`, when the gateway stops, or when deleted."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrivateKind:
    mode: str  # the chat's memory_mode
    name: str  # "Incognito chat"
    label: str  # the short word on a button: "Incognito"
    glyph: str  # its icon in icons.PATHS
    promise: str  # one line: what it keeps
    detail: str  # the sentence behind the promise


def kinds(idle_seconds: float) -> dict[str, PrivateKind]:
    """The two private kinds, Temporary's sentence naming how long it may sit idle."""
    return {
        "incognito": PrivateKind(
            "incognito", "Incognito chat", "Incognito", "incognito",
            "Kept, never learned from.",
            "It is kept until you delete it and may use what Hearth remembers, but nothing "
            "said here is learned or added to memory, and it stays out of the chat list, "
            "search and backups."),
        "temporary": PrivateKind(
            "temporary", "Temporary chat", "Temporary", "hourglass",
            "Gone when you leave.",
            "It neither reads nor adds to your memory, and it is forgotten once it sits idle "
            f"for {idle_span(idle_seconds)}, when the gateway stops, or when you delete it."),
    }


def idle_span(seconds: float) -> str:
    """A number of seconds as words: "an hour", "90 minutes", "2 hours", "45 seconds"."""
    whole = max(int(seconds), 1)
    if whole == 3600:
        return "an hour"
    if whole % 3600 == 0:
        return f"{whole // 3600} hours"
    if whole >= 120 and whole % 60 == 0:
        return f"{whole // 60} minutes"
    if whole == 60:
        return "a minute"
    return f"{whole} seconds"
