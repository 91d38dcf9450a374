"""Splitting a message to a channel's size: every character kept, cuts where a reader expects.

A text longer than the limit is split at the last paragraph break that fits (and leaves the
part at least half full), else the last line break, else the last space, else (a run of
characters with no space at all) at the limit itself. Nothing is dropped: the parts joined
with what separated them are the text. A cut inside a fenced code block closes the fence at
the end of its part and opens it again, with its language, at the start of the next, so each
part renders on its own. Lengths are counted by the channel's own measure (Telegram counts
UTF-16 code units).
"""

from __future__ import annotations

from collections.abc import Callable

Measure = Callable[[str], int]
BREAKS = ("\n\n", "\n", " ")
FENCE = "```"
FENCE_ROOM = 24  # kept free in each part for a fence closed and reopened


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split(text: str, limit: int, measure: Measure = len) -> list[str]:
    """`text` in parts of at most `limit` (by `measure`), in order; [text] when it fits."""
    if limit < 2 * FENCE_ROOM:
        raise ValueError(f"a limit of {limit} is too small to split at")
    if measure(text) <= limit:
        return [text]
    parts: list[str] = []
    rest = text
    reopen = ""
    while rest:
        rest = reopen + rest
        if measure(rest) <= limit:
            parts.append(rest)
            break
        head, rest = _cut(rest, limit - FENCE_ROOM, measure)
        fence = _open_fence(head)
        reopen = ""
        if fence is not None:
            head += FENCE if head.endswith("\n") else "\n" + FENCE
            reopen = f"{FENCE}{fence}\n"
        parts.append(head)
    return parts


def _cut(text: str, room: int, measure: Measure) -> tuple[str, str]:
    """The longest head of `text` within `room` ending at a break, and the rest (the break
    itself goes with the head, so nothing is lost)."""
    fits = _longest_prefix(text, room, measure)
    window = text[:fits]
    for mark in BREAKS:
        at = window.rfind(mark)
        if at >= len(window) // 2:  # a break that leaves a part at least half full
            end = at + len(mark)
            return text[:end], text[end:]
    return text[:fits], text[fits:]


def _longest_prefix(text: str, room: int, measure: Measure) -> int:
    """How many characters of `text` fit in `room` (at least one, so a split always moves)."""
    if measure is len:
        return max(1, min(room, len(text)))
    low, high = 1, min(len(text), room)
    while low < high:
        mid = (low + high + 1) // 2
        if measure(text[:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    if 0 < low < len(text) and "\ud800" <= text[low - 1] <= "\udbff":
        low -= 1  # never between the halves of a surrogate pair
    return max(1, low)


def _open_fence(text: str) -> str | None:
    """The language of a code fence left open at the end of `text` ("" for none); None when
    every fence is closed."""
    language: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(FENCE):
            language = stripped[len(FENCE):].strip() if language is None else None
    return language
