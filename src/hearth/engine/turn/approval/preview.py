"""What an approval card shows of a call without expanding anything: for a file write its path
and content, for an edit its path and a unified diff of the old text against the new, for a
shell command the command, for a fetch the URL, for any other tool its arguments in brief.

The arguments are the model's, and the model may be an attacker: any of them may be missing,
of the wrong type or huge. Nothing here trusts their shape. A value that is not text is shown
by a bounded `repr`; text is cut to `PREVIEW_CHARS` with a note saying how much was left out;
a diff is made from at most `DIFF_INPUT_CHARS` of each side (difflib's cost grows with the
product of the lines, and a view is made on the event loop: a few milliseconds at most); a
lone surrogate (which JSON cannot encode as UTF-8) becomes U+FFFD (`views.sendable_text`).
"""

from __future__ import annotations

import difflib
import reprlib
from typing import Any

from hearth.engine.views import sendable_text

PREVIEW_CHARS = 4000  # of a content, a diff, a command or a summary of arguments
DIFF_INPUT_CHARS = PREVIEW_CHARS  # of each side diffed: bounded, as difflib runs on the loop


class _Brief(reprlib.Repr):
    """A `repr` whose length and depth are bounded, whatever it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 3, 20, 20, 20
        self.maxstring, self.maxother, self.maxlong = 200, 200, 100

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 1000:  # its digits alone would be too long (or refused) to show
            return "<a number too long to show>"
        return super().repr_int(x, level)


_BRIEF = _Brief()


def preview(tool: str, arguments: object) -> dict[str, Any]:
    """The card's preview of a call of `tool` with `arguments` (a `kind` and its fields)."""
    args = arguments if isinstance(arguments, dict) else {}
    if tool == "write_file":
        return _write(args)
    if tool == "edit_file":
        return _edit(args)
    if tool == "shell":
        return _command(args)
    if tool == "web_fetch":
        url, cut = _text(args.get("url"))
        return {"kind": "fetch", "url": url, "truncated": cut, "note": _note(cut, args.get("url"))}
    return _call(arguments)


def _write(args: dict[Any, Any]) -> dict[str, Any]:
    path, _ = _text(args.get("path"))
    content, cut = _text(args.get("content"))
    return {"kind": "write", "path": path, "content": content, "truncated": cut,
            "note": _note(cut, args.get("content"))}


def _edit(args: dict[Any, Any]) -> dict[str, Any]:
    path, _ = _text(args.get("path"))
    old, new = args.get("old_text"), args.get("new_text")
    old_text, old_cut = _text(old)
    new_text, new_cut = _text(new)
    diff, diff_cut = _diff(_whole(old), _whole(new), path or "file")
    cut = old_cut or new_cut or diff_cut
    return {"kind": "edit", "path": path, "old": old_text, "new": new_text, "diff": diff,
            "replace_all": args.get("replace_all") is True, "truncated": cut,
            "note": "Parts of this edit are too long to show whole; only their start is "
                    "shown." if cut else None}


def _command(args: dict[Any, Any]) -> dict[str, Any]:
    command, cut = _text(args.get("command"))
    return {"kind": "command", "command": command, "elevated": args.get("elevated") is True,
            "truncated": cut, "note": _note(cut, args.get("command"))}


def _call(arguments: object) -> dict[str, Any]:
    summary, cut = _text(_BRIEF.repr(arguments))
    return {"kind": "call", "arguments": summary, "truncated": cut, "note": None}


def _text(value: object) -> tuple[str | None, bool]:
    """`value` as text to show (None when missing), cut to PREVIEW_CHARS; and whether cut."""
    if value is None:
        return None, False
    text = value if isinstance(value, str) else _BRIEF.repr(value)
    cut = len(text) > PREVIEW_CHARS
    return sendable_text(text[:PREVIEW_CHARS]), cut


def _whole(value: object) -> str:
    """An edit's side for diffing: its text (at most DIFF_INPUT_CHARS), or its brief repr."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else _BRIEF.repr(value)
    return sendable_text(text[:DIFF_INPUT_CHARS])


def _diff(old: str, new: str, path: str) -> tuple[str, bool]:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS


def _note(cut: bool, value: object) -> str | None:
    """The sentence saying a text was cut (and how long it was), or None."""
    if not cut:
        return None
    whole = f" of {len(value):,}" if isinstance(value, str) else ""
    return f"Only the first {PREVIEW_CHARS:,}{whole} characters are shown."

