"""Walking the workspace for glob and grep: confined, bounded, stoppable, off the event loop.

Owns `walk` (the files under a folder, never leaving the workspace: `.git` skipped, a symlinked
folder followed only when its real path is inside and each real folder once, a symlinked file
listed only when its target is inside; at most `max_files` of them), the glob-pattern
translation and checks, and how a search's work is stopped: `Stopper` (a cancel flag and a
deadline the worker checks between folders, files and chunks) and `off_loop` (the work in a
worker thread: `asyncio.to_thread` runs it in a copy of the caller's context, so the work scope
goes with it; a caller that is cancelled or gives up sets the flag, and the worker stops at its
next check instead of burning CPU for nobody).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol, TypeVar

import re2

from hearth.tools.base import ToolRefused

SKIPPED_FOLDERS = frozenset({".git"})
GRACE_SECONDS = 5.0  # past its own deadline, how long a worker may take to notice it

T = TypeVar("T")
Cut = Literal["files", "bytes", "time", "cancelled"]


# ---------------------------------------------------------------- stopping the work


class Stopper:
    """What a search worker checks between steps: has the caller gone, is time up?"""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._deadline = time.monotonic() + seconds
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def why(self) -> Cut | None:
        """'cancelled' or 'time' when the work must stop now, else None."""
        if self._cancelled.is_set():
            return "cancelled"
        if time.monotonic() >= self._deadline:
            return "time"
        return None


async def off_loop(work: Callable[[Stopper], T], seconds: float, what: str) -> T:
    """`work(stopper)` in a worker thread (the work scope carried), never blocking the loop.

    The worker is told to stop (the flag set) when the caller is cancelled (Stop), when the
    call is over, and when it overruns its deadline by GRACE_SECONDS (then this raises
    ToolRefused saying so; a worker that checks its Stopper returns well before that).
    """
    stopper = Stopper(seconds)
    try:
        return await asyncio.wait_for(asyncio.to_thread(work, stopper), seconds + GRACE_SECONDS)
    except TimeoutError:
        raise ToolRefused(f"The {what} did not finish within {seconds:g} seconds and was "
                          "stopped; give a narrower path or pattern.") from None
    finally:
        stopper.cancel()


# ---------------------------------------------------------------- walking


@dataclass
class Walk:
    """The files a walk found (in walk order) and why it ended early, if it did."""

    files: list[Path] = field(default_factory=list)
    looked_at: int = 0  # files the walk went past, kept or not
    cut: Cut | None = None


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def walk(root: Path, top: Path, max_files: int, stopper: Stopper,
         keep: Callable[[Path], bool]) -> Walk:
    """The files under `top` that `keep` accepts, looking at no more than `max_files` files."""
    found = Walk()
    for path in walk_files(root, top, stopper):
        if found.looked_at >= max_files:
            found.cut = "files"
            return found
        found.looked_at += 1
        if keep(path):
            found.files.append(path)
    found.cut = stopper.why()
    return found


def walk_files(root: Path, top: Path, stopper: Stopper) -> Iterator[Path]:
    """Every file under the folder `top` (a real path inside `root`), never leaving `root`,
    until `stopper` says stop.

    Real folders are walked first, in name order; a symlinked folder is followed afterwards
    only when its real path is inside `root` and was not walked already, so no folder is
    listed twice.
    """
    real_root = str(root.resolve())
    seen: set[str] = set()
    pending: list[Path] = [top]
    linked: list[Path] = []
    while (pending or linked) and stopper.why() is None:
        folder = pending.pop() if pending else linked.pop(0)
        real = os.path.realpath(folder)
        if real in seen or not _inside(real_root, real):
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        folders: list[Path] = []
        for entry in entries:
            if entry.name in SKIPPED_FOLDERS:
                continue
            kind = _kind(entry, real_root)
            if kind == "dir" and entry.is_symlink():
                linked.append(Path(entry.path))
            elif kind == "dir":
                folders.append(Path(entry.path))
            elif kind == "file":
                yield Path(entry.path)
        pending.extend(reversed(folders))  # popped from the end: the first name goes first


def _kind(entry: os.DirEntry[str], real_root: str) -> str:
    """'dir', 'file' or '' (skip) for one folder entry; a link counts only if it stays inside."""
    try:
        if entry.is_symlink() and not _inside(real_root, os.path.realpath(entry.path)):
            return ""
        if entry.is_dir():
            return "dir"
        return "file" if entry.is_file() else ""
    except OSError:
        return ""


# ---------------------------------------------------------------- glob patterns


class NameMatcher(Protocol):
    """A compiled glob: `match` a '/'-separated relative path."""

    def match(self, text: str) -> object | None: ...


def glob_regex(pattern: str) -> NameMatcher:
    """A matcher for a '/'-separated glob: `**` spans folders, `*` and `?` stay in one name.

    Compiled by RE2 (linear time): a pattern such as '*a*a*a*a*a*a*b' makes Python's `re`
    backtrack for minutes on one long name."""
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _segment_regex(part) + ("" if last else "/")
    options = re2.Options()
    options.dot_nl = True
    options.log_errors = False
    try:
        matcher: NameMatcher = re2.compile(regex + r"\z", options)
    except re2.error as exc:
        raise ToolRefused(f"Refused {pattern!r}: it is not a glob pattern this tool can use "
                          f"({_error_text(exc)}).") from None
    return matcher


def _error_text(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _segment_regex(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1:end]
            negate = body.startswith("!")
            body = re.sub(r"([\\^\[\]&~|])", r"\\\1", body[1:] if negate else body)
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def check_pattern(pattern: Any, what: str) -> str:
    """The glob `pattern` when it stays relative and has no `..`, else ToolRefused."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ToolRefused(f"Refused: the {what} is empty; give one such as '**/*.py'.")
    if "\x00" in pattern:
        raise ToolRefused(f"Refused: the {what} contains a NUL character.")
    if PurePosixPath(pattern).is_absolute() or pattern.startswith("~"):
        raise ToolRefused(
            f"Refused {pattern!r}: the {what} must be relative to the folder searched, "
            "not absolute."
        )
    if ".." in re.split(r"[/\\]", pattern):
        raise ToolRefused(f"Refused {pattern!r}: the {what} may not contain '..'.")
    return pattern
