"""grep's matching: the pattern compiled by RE2, files read within bounds, lines matched.

Owns `compile_pattern` (the pattern compiled by RE2, a linear-time engine, so no pattern can
make a search backtrack for ever; what RE2 cannot do, backreferences and lookaround, is refused
with a sentence saying what to do instead), `read_text` (a regular file read in chunks, never
more than a cap, binary files left out) and `matching_lines` (a file's matching lines, one
slice of the file at a time, a `Stopper` checked between slices).

Lines are matched as Python's `re` would match each line on its own: the pattern runs in
multi-line mode with `never_nl` (no match crosses a line end), `\\A` and `\\Z`/`\\z` stand for
the line's start and end, and a line's '\\r\\n' ending counts as '\\n'.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import re2

from hearth.tools.base import ToolRefused
from hearth.tools.search_walk import Stopper

READ_CHUNK_BYTES = 1024 * 1024
SLICE_BYTES = 256 * 1024  # matched between Stopper checks
BINARY_SNIFF_BYTES = 8192
_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9gk]")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


class Match(Protocol):
    def start(self) -> int: ...


class LineRegex(Protocol):
    """A pattern compiled for grep: `search` bytes from `pos` up to `endpos`."""

    def search(self, text: bytes, pos: int, endpos: int) -> Match | None: ...


# ---------------------------------------------------------------- the pattern


def compile_pattern(pattern: Any, ignore_case: bool) -> LineRegex:
    """The pattern compiled by RE2 for line matching, or ToolRefused saying why it cannot be."""
    if not isinstance(pattern, str) or not pattern:
        raise ToolRefused("Refused: the pattern is empty; give a regular expression to find.")
    options = re2.Options()
    options.never_nl = True
    options.never_capture = True  # only where a match starts is used
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        compiled: LineRegex = re2.compile("(?m)" + line_anchors(pattern), options)
    except re2.error as exc:
        raise ToolRefused(_refusal(pattern, _error_text(exc))) from None
    return compiled


def line_anchors(pattern: str) -> str:
    """`pattern` with `\\A` as `^` and `\\Z`/`\\z` as `$` outside character classes: per line,
    as Python's `re` read them on a line alone (RE2 spells `\\Z` only as `\\z`)."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            pair = pattern[i:i + 2]
            out.append(pair if in_class else {"\\A": "^", "\\Z": "$", "\\z": "$"}.get(pair, pair))
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
            i += 1
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i:i + 1] == "]":  # a ']' first in a class is a literal
                out.append("]")
                i += 1
            continue
        if char == "]" and in_class:
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def _error_text(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _refusal(pattern: str, error: str) -> str:
    shown = pattern if len(pattern) <= 60 else pattern[:59] + "…"
    if _BACKREFERENCE.search(error) or "(?P=" in pattern:
        return (f"Refused {shown!r}: it uses a backreference (such as \\1), which grep's "
                "linear-time engine (RE2) does not support; search for the text itself, or "
                "for one part of it and read the lines found.")
    if any(mark in error for mark in _LOOKAROUND):
        return (f"Refused {shown!r}: it uses a lookahead or lookbehind ((?=, (?!, (?<=, (?<!), "
                "which grep's linear-time engine (RE2) does not support; match the "
                "surrounding text as part of the pattern instead.")
    if "(?>" in error or "bad repetition operator: ++" in error or "*+" in error:
        return (f"Refused {shown!r}: grep's engine (RE2) has no atomic groups or possessive "
                "repeats, and needs none (it never backtracks); drop the '(?>' or the extra '+'.")
    return (f"Refused {shown!r}: it is not a valid regular expression for grep's engine "
            f"(RE2): {error}.")


# ---------------------------------------------------------------- reading a file


def read_text(path: Path, limit: int, stopper: Stopper) -> bytes | None:
    """The bytes of the regular file `path`, or None when it is not one, is larger than
    `limit`, looks binary, cannot be read, or the Stopper said stop while reading.

    Opened without blocking (a FIFO put in the file's place cannot hang the worker) and
    read in chunks, never past `limit` + 1 bytes whatever the file's size claims."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            if stopper.why() is not None:
                return None
            chunk = os.read(fd, min(READ_CHUNK_BYTES, limit + 1 - size))
            if not chunk:
                break
            if not chunks and b"\x00" in chunk[:BINARY_SNIFF_BYTES]:
                return None
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks) if size <= limit else None


# ---------------------------------------------------------------- matching lines


def matching_lines(data: bytes, regex: LineRegex, stopper: Stopper) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its ending) for each line of `data` the regex matches, in
    order; between slices of about SLICE_BYTES it stops if the Stopper says so."""
    data = data.replace(b"\r\n", b"\n").removesuffix(b"\r")
    end = len(data) - 1 if data.endswith(b"\n") else len(data)  # no line after the last '\n'
    start, number = 0, 1
    while start < len(data) and stopper.why() is None:
        stop = _slice_end(data, start)
        pos = start
        while pos <= min(stop, end):
            found = regex.search(data, pos, stop)
            if found is None or found.start() > end or (
                    found.start() >= stop and stop < len(data)):
                break
            line_start = data.rfind(b"\n", 0, found.start()) + 1
            line_end = data.find(b"\n", found.start())
            line_end = len(data) if line_end == -1 else line_end
            number += data.count(b"\n", start, line_start)
            start = line_start
            yield number, data[line_start:line_end]
            pos = line_end + 1
        number += data.count(b"\n", start, stop)
        start = stop


def _slice_end(data: bytes, start: int) -> int:
    """The end of the slice from `start`: just after the first line end past SLICE_BYTES."""
    if len(data) - start <= SLICE_BYTES:
        return len(data)
    newline = data.find(b"\n", start + SLICE_BYTES)
    return len(data) if newline == -1 else newline + 1
