"""An approval at the terminal: what the call would do, and the owner's answer to it.

The gateway's approval view (`GET /api/approvals`) names the tool, its target and arguments;
its `preview` (a `kind` and its fields, when the gateway gives one) says what the call would
do: a write shows the first lines of its content, an edit its diff, a shell call the command,
a fetch the URL. Without a preview the arguments are summarised here the same way. "Always" is
offered unless the view says `always_allowed: false` (a chat that keeps nothing may not leave
a standing grant).
"""

from __future__ import annotations

import json
from typing import Any

from hearth.client.terminal import Screen

SHOWN_LINES = 8  # of a file's content or an edit's text
DIFF_LINES = 16  # of an edit's diff
SHOWN_CHARS = 160  # of one line or one argument's value

ANSWERS = {
    "o": "allow_once", "once": "allow_once", "y": "allow_once", "yes": "allow_once",
    "a": "allow_always", "always": "allow_always",
    "d": "deny", "deny": "deny", "n": "deny", "no": "deny",
}
SAID = {
    "allow_once": "Allowed once.",
    "allow_always": "Allowed always: {tool} will not ask again.",
    "deny": "Denied: {tool} will not run.",
}


def always_offered(view: dict[str, Any]) -> bool:
    return view.get("always_allowed", True) is not False


def question(view: dict[str, Any]) -> str:
    choices = "[o]nce, [a]lways, [d]eny? " if always_offered(view) else "[o]nce, [d]eny? "
    return f"Allow {view.get('tool', 'this call')}? {choices}"


def describe(view: dict[str, Any]) -> list[str]:
    """The lines shown before the question: the tool and target, then what it would do."""
    tool = str(view.get("tool", "a tool"))
    target = view.get("target")
    head = f"Approval needed: {tool}" + (f" on {_clip(str(target))}" if target else "")
    preview = view.get("preview")
    shown = from_preview(preview, str(target) if target else None) \
        if isinstance(preview, dict) else None
    if shown is None:
        arguments = view.get("arguments")
        shown = summarise(arguments if isinstance(arguments, dict) else {},
                          str(target) if target else None)
    return [head, *shown]


def from_preview(preview: dict[str, Any], target: str | None) -> list[str] | None:
    """The lines of the gateway's preview of a call; None for a kind not known here."""
    kind = preview.get("kind")
    where = _where(preview, target)
    if kind == "write":
        lines = [*where, *_excerpt(str(preview.get("content") or ""), "  | ")]
    elif kind == "edit" and preview.get("diff"):
        lines = [*where, *_diff(str(preview["diff"]))]
    elif kind == "edit":
        lines = [*where, *_excerpt(str(preview.get("old") or ""), "  - "),
                 *_excerpt(str(preview.get("new") or ""), "  + ")]
    elif kind == "command":
        outside = " (outside the sandbox)" if preview.get("elevated") else ""
        lines = [f"  $ {_clip(str(preview.get('command') or ''))}{outside}"]
    elif kind == "fetch":
        lines = [f"  {_clip(str(preview.get('url') or ''))}"]
    elif kind == "call":
        lines = [f"  {_clip(str(preview.get('arguments') or ''))}"]
    else:
        return None
    note = preview.get("note")
    return [*lines, f"  ({note})"] if note else lines


def summarise(arguments: dict[str, Any], target: str | None = None) -> list[str]:
    """What a call with these arguments would do, read from the arguments themselves (the
    path is left out when it is the target already named)."""
    if isinstance(arguments.get("command"), str):
        return [f"  $ {_clip(arguments['command'])}"]
    where = _where(arguments, target)
    if isinstance(arguments.get("old_text"), str) or isinstance(arguments.get("new_text"), str):
        return [*where, *_excerpt(str(arguments.get("old_text", "")), "  - "),
                *_excerpt(str(arguments.get("new_text", "")), "  + ")]
    if isinstance(arguments.get("content"), str):
        return [*where, *_excerpt(arguments["content"], "  | ")]
    return [f"  {name}: {_clip(_plain(value))}" for name, value in arguments.items()]


def decide(screen: Screen, view: dict[str, Any]) -> str:
    """Ask until the owner answers: `allow_once`, `allow_always` or `deny`. Ctrl-C and Ctrl-D
    are left to the caller (KeyboardInterrupt, EOFError)."""
    for line in describe(view):
        screen.line(line)
    offered = always_offered(view)
    while True:
        decision = ANSWERS.get(screen.ask(question(view)).strip().lower())
        if decision is not None and (decision != "allow_always" or offered):
            return decision
        screen.note("Type o to allow it once, a to allow it always, d to deny it."
                    if offered else "Type o to allow it once or d to deny it.")


def said(decision: str, view: dict[str, Any]) -> str:
    return SAID[decision].format(tool=view.get("tool", "the tool"))


def _where(arguments: dict[str, Any], target: str | None) -> list[str]:
    path = arguments.get("path")
    return [f"  {_clip(str(path))}"] if path and str(path) != target else []


def _diff(diff: str) -> list[str]:
    """A unified diff's changes, without its file and hunk lines (the path is shown already,
    and the hunks number the lines of the two texts, not of the file)."""
    lines = [line for line in diff.splitlines() if not line.startswith(("--- ", "+++ ", "@@"))]
    shown = [f"  {_clip(line)}" for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        shown.append(f"  … {len(lines) - DIFF_LINES} more lines of the diff")
    return shown


def _excerpt(text: str, prefix: str) -> list[str]:
    lines = text.splitlines() or [""]
    shown = [f"{prefix}{_clip(line)}" for line in lines[:SHOWN_LINES]]
    if len(lines) > SHOWN_LINES:
        more = len(lines) - SHOWN_LINES
        shown.append(f"{prefix}… {more} more line{'s' if more != 1 else ''}")
    return shown


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"
