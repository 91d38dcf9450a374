"""The search tools: glob (files by name pattern) and grep (lines by regex), both confined.

This module owns the two tools, their limits (`SearchLimits`) and what they answer, including
the sentence that says when a search was cut short. Walking the workspace (confined, bounded,
stoppable) is search_walk.py's; matching a pattern (RE2, linear time) is search_match.py's.
Both tools run their walk off the event loop with a time limit, and Stop ends them promptly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2

from hearth.tools import fence
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.files import size_words
from hearth.tools.search_match import LineRegex, compile_pattern, matching_lines, read_text
from hearth.tools.search_walk import (
    Cut,
    NameMatcher,
    Stopper,
    Walk,
    check_pattern,
    glob_regex,
    off_loop,
    walk,
)
from hearth.tools.workspace import display, resolve_inside

MAX_GLOB_RESULTS = 500
MAX_GREP_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_GREP_FILE_BYTES = 5_000_000
MAX_PATTERN_CHARS = 2000


@dataclass(frozen=True)
class SearchLimits:
    """How much one glob or grep may do before it stops and says so."""

    max_files: int = 50_000  # files one walk looks at
    max_file_bytes: int = MAX_GREP_FILE_BYTES  # grep skips a larger file
    max_total_bytes: int = 200_000_000  # grep reads at most about this much in all
    seconds: float = 30.0


def _folder_words(name: str) -> str:
    return "the workspace" if name == "." else name


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _files(count: int) -> str:
    return "1 file" if count == 1 else f"{count} files"


def _checked_length(pattern: Any) -> Any:
    if isinstance(pattern, str) and len(pattern) > MAX_PATTERN_CHARS:
        raise ToolRefused(f"Refused: the pattern is {len(pattern)} characters long; give one "
                          f"of at most {MAX_PATTERN_CHARS}.")
    return pattern


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
    placed: Placed = "gateway"
    parallel_safe = True

    def __init__(self, limits: SearchLimits | None = None) -> None:
        self.limits = limits or SearchLimits()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        pattern = check_pattern(_checked_length(args.get("pattern")), "pattern")
        regex = glob_regex(pattern)
        top = resolve_inside(ctx.workspace, args.get("path") or ".")
        try:
            work = functools.partial(self._glob, pattern, regex, top, ctx)
            return await off_loop(work, self.limits.seconds, "glob")
        finally:
            re2.purge()  # compiled patterns hold memory; none is kept between calls

    def _glob(self, pattern: str, regex: NameMatcher, top: Path, ctx: ToolContext,
              stopper: Stopper) -> ToolOutcome:
        where = display(ctx.workspace, top)
        if not top.is_dir():
            raise ToolRefused(f"There is no folder {where!r} in the workspace.")

        def keep(path: Path) -> bool:
            matched = regex.match(path.relative_to(top).as_posix()) is not None
            return matched and not fence.hides(path, ctx)

        walked = walk(ctx.workspace, top, self.limits.max_files, stopper, keep)
        found = sorted(display(ctx.workspace, path) for path in walked.files)
        shown = found[:MAX_GLOB_RESULTS]
        lines = list(shown) or ["(no files match)"]
        noun = "file" if len(found) == 1 else "files"
        receipt = f"Found {len(found)} {noun} matching {pattern} in {_folder_words(where)}"
        if len(found) > len(shown):
            lines.append(f"[showing the first {len(shown)} of {len(found)} files]")
            receipt += f"; showing the first {len(shown)}"
        if walked.cut is not None:
            lines.append(_glob_cut(walked, stopper))
            receipt += f"; looked at only the first {_files(walked.looked_at)}"
        return ToolOutcome(output="\n".join(lines)[: ctx.output_chars], receipt=receipt + ".")


def _glob_cut(walked: Walk, stopper: Stopper) -> str:
    done = f"the first {_files(walked.looked_at)}"
    if walked.cut == "files":
        return (f"[Looked at {done} only; the rest were not looked at. "
                "Give a narrower path to list them.]")
    return (f"[Stopped after {stopper.seconds:g} seconds, having looked at {done}; the rest "
            "were not looked at. Give a narrower path to list them.]")


# ---------------------------------------------------------------- grep


@dataclass
class GrepResult:
    matches: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    skipped: int = 0
    capped: bool = False
    cut: bool = False  # a long line was cut
    searched: int = 0  # files read and matched to their end
    bytes_read: int = 0
    stopped: Cut | None = None  # why files were left unsearched
    unsearched: int = 0  # files found but not searched (when the walk itself ended early: 0)


class Grep:
    name = "grep"
    description = (
        "Search text files in the workspace for lines matching a regular expression (RE2 "
        "syntax: Python's, less backreferences and lookaround). Answers 'path:line: text' "
        "lines; skips binary files, very large files and .git."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (RE2 syntax)"},
            "path": {"type": "string", "description": "File or folder to search; default '.'"},
            "glob": {"type": "string", "description": "Only files matching this, e.g. '*.py'"},
            "ignore_case": {"type": "boolean", "description": "Match case-insensitively"},
        },
        "required": ["pattern"],
    }
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    def __init__(self, limits: SearchLimits | None = None) -> None:
        self.limits = limits or SearchLimits()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        pattern = _checked_length(args.get("pattern"))
        try:
            regex = compile_pattern(pattern, bool(args.get("ignore_case", False)))
            only = args.get("glob")
            only = check_pattern(_checked_length(only), "glob filter") if only else None
            name_filter = glob_regex(only) if only else None
            top = resolve_inside(ctx.workspace, args.get("path") or ".")
            work = functools.partial(self._grep, regex, top, (only, name_filter), ctx)
            result = await off_loop(work, self.limits.seconds, "grep")
        finally:
            re2.purge()  # compiled patterns hold memory; none is kept between calls
        return _grep_outcome(pattern, result, self.limits, ctx)

    def _grep(self, regex: LineRegex, top: Path, only: tuple[str | None, NameMatcher | None],
              ctx: ToolContext, stopper: Stopper) -> GrepResult:
        where = display(ctx.workspace, top)
        raw, name_filter = only

        def wanted(path: Path) -> bool:
            return name_filter is None or _passes(name_filter, raw or "", path, top)

        if top.is_file():
            walked = Walk(files=[top] if wanted(top) else [], looked_at=1)
        elif top.is_dir():
            walked = walk(ctx.workspace, top, self.limits.max_files, stopper,
                          lambda path: wanted(path) and not fence.hides(path, ctx))
        else:
            raise ToolRefused(f"There is no file or folder {where!r} in the workspace.")
        result = GrepResult(stopped=walked.cut)
        files = sorted(walked.files, key=lambda p: p.as_posix())
        for index, path in enumerate(files):
            stop = _must_stop(result, self.limits, stopper)
            if stop is None:
                _search_file(path, display(ctx.workspace, path), regex, result,
                             self.limits.max_file_bytes, stopper)
                stop = stopper.why()  # this file was cut short
            if result.capped:
                break
            if stop is not None:
                result.stopped, result.unsearched = stop, len(files) - index
                break
        return result


def _must_stop(result: GrepResult, limits: SearchLimits, stopper: Stopper) -> Cut | None:
    if result.bytes_read >= limits.max_total_bytes:
        return "bytes"
    return stopper.why()


def _passes(name_filter: NameMatcher, raw: str, path: Path, top: Path) -> bool:
    """A filter with no '/' matches the file name; one with '/' the path below `top`."""
    if "/" not in raw:
        return name_filter.match(path.name) is not None
    relative = path.name if path == top else path.relative_to(top).as_posix()
    return name_filter.match(relative) is not None


def _search_file(path: Path, name: str, regex: LineRegex, result: GrepResult,
                 max_bytes: int, stopper: Stopper) -> None:
    """Add `path`'s matching lines to `result`, stopping once the match cap is passed."""
    data = read_text(path, max_bytes, stopper)
    if data is None:
        if stopper.why() is None:
            result.skipped += 1
        return
    result.bytes_read += len(data)
    for number, raw in matching_lines(data, regex, stopper):
        if len(result.matches) >= MAX_GREP_MATCHES:
            result.capped = True
            return
        line = raw[: (MAX_LINE_CHARS + 1) * 4].decode("utf-8", errors="replace")
        if len(line) > MAX_LINE_CHARS:
            line, result.cut = line[:MAX_LINE_CHARS] + "…", True
        result.matches.append(f"{name}:{number}: {line}")
        result.files.add(name)
    if stopper.why() is None:
        result.searched += 1  # to its end


def _grep_outcome(pattern: str, result: GrepResult, limits: SearchLimits,
                  ctx: ToolContext) -> ToolOutcome:
    count, files = len(result.matches), len(result.files)
    lines = result.matches or ["(no matches)"]
    if result.cut:
        lines.append(f"[lines longer than {MAX_LINE_CHARS} characters were cut]")
    if result.capped:
        lines.append(f"[stopped at {MAX_GREP_MATCHES} matches; narrow the pattern or path]")
    if result.skipped:
        lines.append(f"[skipped {result.skipped} binary, unreadable or oversized file(s)]")
    if result.stopped is not None:
        lines.append(_grep_cut(result, limits))
    match_noun = "match" if count == 1 else "matches"
    file_noun = "file" if files == 1 else "files"
    shown = f"over {MAX_GREP_MATCHES}" if result.capped else str(count)
    receipt = f"Found {shown} {match_noun} for {_short(pattern)!r} in {files} {file_noun}"
    if result.capped:
        receipt += f"; showing the first {MAX_GREP_MATCHES}"
    if result.stopped is not None:
        receipt += f"; searched only {_files(result.searched)}"
    # The notes go last, so the cap on the output can cut matches but never the notes.
    notes = len(lines) - max(count, 1)
    body, tail = "\n".join(lines[: len(lines) - notes]), "\n".join(lines[len(lines) - notes:])
    room = max(ctx.output_chars - len(tail) - 1, 0)
    output = f"{body[:room]}\n{tail}" if tail else body[: ctx.output_chars]
    return ToolOutcome(output=output, receipt=receipt + ".")


def _grep_cut(result: GrepResult, limits: SearchLimits) -> str:
    """The sentence saying which files were left unsearched, and what to do about it."""
    left = result.unsearched
    rest = (f"the other {_files(left)} found {'was' if left == 1 else 'were'}" if left
            else "the rest of the folder was")
    advice = "Give a narrower path or a glob filter to search them."
    if result.stopped == "files":
        return (f"[Went through the first {_files(limits.max_files)} only; the rest of the "
                f"folder was not searched. {advice}]")
    if result.stopped == "bytes":
        return (f"[Stopped after reading {size_words(result.bytes_read)} from "
                f"{_files(result.searched)}; {rest} not searched. {advice}]")
    return (f"[Stopped after {limits.seconds:g} seconds, having searched "
            f"{_files(result.searched)}; {rest} not searched. {advice}]")
