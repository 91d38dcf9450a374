"""The search tools: glob (files by name pattern) and grep (lines by regex), both confined.

This module owns walking the workspace for them: it skips `.git` folders, follows a symlinked
folder only when its real path is inside the workspace (each real folder once), lists a
symlinked file only when its target is inside, and caps what it reports.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from hearth.tools import fence
from hearth.tools.base import Effect, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.workspace import display, resolve_inside

MAX_GLOB_RESULTS = 500
MAX_GREP_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_GREP_FILE_BYTES = 5_000_000
BINARY_SNIFF_BYTES = 8192
SKIPPED_FOLDERS = frozenset({".git"})


# ---------------------------------------------------------------- walking and matching


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def walk_files(root: Path, top: Path) -> Iterator[Path]:
    """Every file under the folder `top` (a real path inside `root`), never leaving `root`.

    Real folders are walked first; a symlinked folder is followed afterwards only when its
    real path is inside `root` and was not walked already, so no folder is listed twice.
    """
    real_root = str(root.resolve())
    seen: set[str] = set()
    pending: list[Path] = [top]
    linked: list[Path] = []
    while pending or linked:
        folder = pending.pop() if pending else linked.pop(0)
        real = os.path.realpath(folder)
        if real in seen or not _inside(real_root, real):
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_FOLDERS:
                continue
            kind = _kind(entry, real_root)
            if kind == "dir":
                (linked if entry.is_symlink() else pending).append(Path(entry.path))
            elif kind == "file":
                yield Path(entry.path)


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


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a '/'-separated glob: `**` spans folders, `*` and `?` stay in one name."""
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _segment_regex(part) + ("" if last else "/")
    return re.compile(regex + r"\Z", re.DOTALL)


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


def _folder_words(name: str) -> str:
    return "the workspace" if name == "." else name


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- glob


class Glob:
    name = "glob"
    description = (
        "List files in the workspace whose path matches a glob pattern such as '**/*.py' "
        "('**' spans folders, '*' stays within one name), relative to an optional folder."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. '**/*.md'"},
            "path": {"type": "string", "description": "Folder to search in; default '.'"},
        },
        "required": ["pattern"],
    }
    effect: Effect = "reads"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        pattern = check_pattern(args.get("pattern"), "pattern")
        top = resolve_inside(ctx.workspace, args.get("path") or ".")
        return await asyncio.to_thread(self._glob, pattern, top, ctx)

    def _glob(self, pattern: str, top: Path, ctx: ToolContext) -> ToolOutcome:
        where = display(ctx.workspace, top)
        if not top.is_dir():
            raise ToolRefused(f"There is no folder {where!r} in the workspace.")
        regex = glob_regex(pattern)
        found = sorted(
            display(ctx.workspace, path) for path in walk_files(ctx.workspace, top)
            if regex.match(path.relative_to(top).as_posix()) and not fence.hides(path, ctx)
        )
        shown = found[:MAX_GLOB_RESULTS]
        lines = list(shown) or ["(no files match)"]
        noun = "file" if len(found) == 1 else "files"
        receipt = f"Found {len(found)} {noun} matching {pattern} in {_folder_words(where)}"
        if len(found) > len(shown):
            lines.append(f"[showing the first {len(shown)} of {len(found)} files]")
            receipt += f"; showing the first {len(shown)}"
        return ToolOutcome(output="\n".join(lines)[: ctx.output_chars], receipt=receipt + ".")


# ---------------------------------------------------------------- grep


@dataclass
class GrepResult:
    matches: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    skipped: int = 0
    capped: bool = False
    cut: bool = False


class Grep:
    name = "grep"
    description = (
        "Search text files in the workspace for lines matching a Python regular expression. "
        "Answers 'path:line: text' lines; skips binary files, very large files and .git."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Python regular expression"},
            "path": {"type": "string", "description": "File or folder to search; default '.'"},
            "glob": {"type": "string", "description": "Only files matching this, e.g. '*.py'"},
            "ignore_case": {"type": "boolean", "description": "Match case-insensitively"},
        },
        "required": ["pattern"],
    }
    effect: Effect = "reads"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        regex = _compile(args.get("pattern"), bool(args.get("ignore_case", False)))
        only = args.get("glob")
        only = check_pattern(only, "glob filter") if only else None
        top = resolve_inside(ctx.workspace, args.get("path") or ".")
        return await asyncio.to_thread(self._grep, regex, top, only, ctx)

    def _grep(self, regex: re.Pattern[str], top: Path, only: str | None,
              ctx: ToolContext) -> ToolOutcome:
        where = display(ctx.workspace, top)
        if top.is_file():
            files = [top]
        elif top.is_dir():
            files = sorted((p for p in walk_files(ctx.workspace, top) if not fence.hides(p, ctx)),
                           key=lambda p: p.as_posix())
        else:
            raise ToolRefused(f"There is no file or folder {where!r} in the workspace.")
        name_filter = glob_regex(only) if only else None
        result = GrepResult()
        for path in files:
            if name_filter is None or _passes(name_filter, only or "", path, top):
                _search_file(path, display(ctx.workspace, path), regex, result)
            if result.capped:
                break
        return _grep_outcome(regex.pattern, result, ctx)


def _compile(pattern: Any, ignore_case: bool) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ToolRefused("Refused: the pattern is empty; give a regular expression to find.")
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolRefused(
            f"Refused: {_short(pattern)!r} is not a valid regular expression ({exc})."
        ) from exc


def _passes(name_filter: re.Pattern[str], raw: str, path: Path, top: Path) -> bool:
    """A filter with no '/' matches the file name; one with '/' the path below `top`."""
    if "/" not in raw:
        return bool(name_filter.match(path.name))
    relative = path.name if path == top else path.relative_to(top).as_posix()
    return bool(name_filter.match(relative))


def _search_file(path: Path, name: str, regex: re.Pattern[str], result: GrepResult) -> None:
    """Add `path`'s matching lines to `result`, stopping once the match cap is passed."""
    try:
        if path.stat().st_size > MAX_GREP_FILE_BYTES:
            result.skipped += 1
            return
        data = path.read_bytes()
    except OSError:
        result.skipped += 1
        return
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        result.skipped += 1
        return
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not regex.search(line):
            continue
        if len(result.matches) >= MAX_GREP_MATCHES:
            result.capped = True
            return
        if len(line) > MAX_LINE_CHARS:
            line, result.cut = line[:MAX_LINE_CHARS] + "…", True
        result.matches.append(f"{name}:{number}: {line}")
        result.files.add(name)


def _grep_outcome(pattern: str, result: GrepResult, ctx: ToolContext) -> ToolOutcome:
    count, files = len(result.matches), len(result.files)
    lines = result.matches or ["(no matches)"]
    if result.cut:
        lines.append(f"[lines longer than {MAX_LINE_CHARS} characters were cut]")
    if result.capped:
        lines.append(f"[stopped at {MAX_GREP_MATCHES} matches; narrow the pattern or path]")
    if result.skipped:
        lines.append(f"[skipped {result.skipped} binary, unreadable or oversized file(s)]")
    match_noun = "match" if count == 1 else "matches"
    file_noun = "file" if files == 1 else "files"
    shown = f"over {MAX_GREP_MATCHES}" if result.capped else str(count)
    receipt = f"Found {shown} {match_noun} for {_short(pattern)!r} in {files} {file_noun}"
    if result.capped:
        receipt += f"; showing the first {MAX_GREP_MATCHES}"
    return ToolOutcome(output="\n".join(lines)[: ctx.output_chars], receipt=receipt + ".")
