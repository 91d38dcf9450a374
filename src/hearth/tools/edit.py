"""The edit tool: edit_file, an exact string replacement inside a text file in the workspace.

This module owns finding the text to replace (exactly once, or everywhere when asked), keeping
the file's line endings and permission bits, and writing the result atomically.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.files import MAX_WRITE_BYTES, size_words, write_atomically
from hearth.tools.workspace import display, resolve_inside

MAX_LINES_LISTED = 20


@dataclass(frozen=True)
class Replacement:
    """What replacing `old` by `new` in `before` gives: the new text and where it landed."""

    before: str
    after: str
    count: int
    lines: list[tuple[int, int]]  # first and last line of each replacement in `after`


class EditFile:
    name = "edit_file"
    description = (
        "Edit a text file in the workspace by replacing an exact piece of its text. "
        "old_text must match the file exactly (whitespace included) and appear once, "
        "unless replace_all is set; include enough surrounding lines to make it unique."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path in the workspace"},
            "old_text": {"type": "string", "description": "The exact text to replace"},
            "new_text": {"type": "string", "description": "The text to put in its place"},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence rather than exactly one; default false",
            },
        },
        "required": ["path", "old_text", "new_text"],
    }
    effect: Effect = "changes"
    placed: Placed = "gateway"
    parallel_safe = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        old, new = _text_argument(args, "old_text"), _text_argument(args, "new_text")
        if not old:
            raise ToolRefused("Refused: old_text is empty; give the exact text to replace.")
        if old == new:
            raise ToolRefused("Refused: old_text and new_text are the same, so nothing changes.")
        path = resolve_inside(ctx.workspace, args["path"], ctx.placement.hidden)
        replace_all = bool(args.get("replace_all", False))
        return await asyncio.to_thread(self._edit, path, old, new, replace_all, ctx)

    def _edit(self, path: Path, old: str, new: str, replace_all: bool,
              ctx: ToolContext) -> ToolOutcome:
        name = display(ctx.workspace, path)
        text = _read_text(path, name)
        change = _replace(text, old, new, replace_all, name)
        data = change.after.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolRefused(
                f"Refused: the edited {name} would be {size_words(len(data))}, over the "
                f"{size_words(MAX_WRITE_BYTES)} a file may hold."
            )
        write_atomically(path, data)
        noun = "occurrence" if change.count == 1 else "occurrences"
        before_size = size_words(len(change.before.encode("utf-8")))
        receipt = (f"Edited {name}: replaced {change.count} {noun} "
                   f"({before_size} → {size_words(len(data))}).")
        output = f"Edited {name}: replaced {change.count} {noun} at {_where(change.lines)}."
        return ToolOutcome(output=output, receipt=receipt)


def _text_argument(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolRefused(f"Refused: the argument {key!r} must be a string.")
    return value


def _read_text(path: Path, name: str) -> str:
    """The file's text with its line endings untouched, or ToolRefused saying why not."""
    if not path.is_file():
        raise ToolRefused(f"Refused: there is no file {name!r} in the workspace to edit.")
    if path.stat().st_size > MAX_WRITE_BYTES:
        raise ToolRefused(
            f"Refused: {name} is {size_words(path.stat().st_size)}, over the "
            f"{size_words(MAX_WRITE_BYTES)} edit_file works on."
        )
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolRefused(
            f"Refused: {name} is not UTF-8 text (a binary file?), so it cannot be edited "
            "as text."
        ) from exc


def _with_endings(text: str, eol: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", eol)


def _replace(text: str, old: str, new: str, replace_all: bool, name: str) -> Replacement:
    """Replace `old` by `new` in `text`, in the file's own line endings when it uses CRLF."""
    crlf = text.count("\r\n")
    if crlf and crlf >= text.count("\n") - crlf:  # mostly CRLF: speak the file's endings
        converted_old, converted_new = _with_endings(old, "\r\n"), _with_endings(new, "\r\n")
        if converted_old in text:
            old, new = converted_old, converted_new
    count = text.count(old)
    if count == 0:
        raise ToolRefused(_not_found(text, old, name))
    if count > 1 and not replace_all:
        raise ToolRefused(
            f"Refused: the text to replace appears {count} times in {name}; give more "
            "surrounding text so it is unique, or set replace_all."
        )
    after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return Replacement(text, after, count if replace_all else 1,
                       _landing_lines(text, old, new, replace_all))


def _not_found(text: str, old: str, name: str) -> str:
    sentence = f"Refused: the text to replace was not found in {name}"
    if " ".join(old.split()) in " ".join(text.split()):
        return (sentence + "; it does appear when whitespace and line endings are ignored, so "
                "copy the exact indentation, spaces and line breaks (read_file shows them).")
    return sentence + "; read the file and copy the text exactly."


def _landing_lines(text: str, old: str, new: str, replace_all: bool) -> list[tuple[int, int]]:
    """The first and last line each replacement occupies in the edited text."""
    shift = new.count("\n") - old.count("\n")
    span = new.count("\n") - (1 if new.endswith("\n") else 0)
    lines: list[tuple[int, int]] = []
    start = text.find(old)
    while start != -1:
        first = text.count("\n", 0, start) + 1 + len(lines) * shift
        lines.append((first, first + max(span, 0)))
        if not replace_all:
            break
        start = text.find(old, start + len(old))
    return lines


def _where(lines: list[tuple[int, int]]) -> str:
    shown = [f"{a}" if a == b else f"{a}–{b}" for a, b in lines[:MAX_LINES_LISTED]]
    more = len(lines) - len(shown)
    words = ", ".join(shown) + (f" and {more} more" if more else "")
    single = len(lines) == 1 and lines[0][0] == lines[0][1]
    return f"line {words}" if single else f"lines {words}"


