"""The privacy fence around tools: what a restricted chat's work may not do with a tool.

Decided before a call is approved or run (the gate asks `refusal` first, ahead of policy
grants, trust and the owner) and again by the tools as they run:
- a tool that keeps something lasting (`keeps = "memory"`) is refused to work that keeps
  nothing (Incognito, Temporary, unreadable);
- a tool that reads memory (`reads_memory = True`) is refused to work that reads none
  (Temporary, unreadable) and, in any chat, to the work of someone who may not use the
  owner's memory (an app without manage_memory, a guest: `reach.memory_refusal`), whose
  calls may not name the memory folder either and whose commands run with it hidden;
- a call that names a path in the memory folder is refused when it may change something and
  the work keeps nothing, and refused outright when the work reads no memory. Listings and
  searches leave the folder out for work that reads none (`withheld`), and the shell's sandbox
  keeps it read-only, or hides it, for such work (`sandbox_rule`). Elevated exec, which would
  run outside that sandbox, is refused to work that keeps nothing, and so is every command
  where there is no sandbox: without one, only the command's text could say what it touches,
  and that is no fence.
"""

from __future__ import annotations

import os
import shlex
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from hearth.privacy import reach
from hearth.tools.base import Tool, ToolContext, effect_of
from hearth.tools.workspace import kept_out

FILE_TOOLS = ("read_file", "list_dir", "write_file", "edit_file", "glob", "grep")


def refusal(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str | None:
    """The sentence refusing this call for the work running now, or None."""
    mode = reach.restricted_mode()
    if mode is None:
        return _not_for_principal(tool, args, ctx)
    keeps = getattr(tool, "keeps", None)
    if keeps:
        return reach.lasting_refusal(str(keeps))
    if getattr(tool, "reads_memory", False):
        read = reach.read_refusal(f"{tool.name} was not run")
        if read is not None:
            return read
    if tool.placed == "command" and args.get("elevated"):
        return reach.write_refusal("no command may run outside the sandbox for it")
    if tool.placed == "command" and not ctx.placement.sandboxed:
        return (f"{reach.why(mode)}, and the shell cannot be sandboxed here "
                f"({ctx.placement.why or 'the sandbox is off'}), so no command may run for it.")
    if not names_memory(tool.name, args, ctx):
        return None
    read = reach.read_refusal("the memory folder is closed to its tools")
    if read is not None:
        return read
    if effect_of(tool, args, ctx) != "reads":
        return reach.write_refusal("its tools may not change the memory folder")
    return None


def _not_for_principal(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str | None:
    """In a chat that keeps things, the work of someone who may not use the owner's memory
    (an app without manage_memory, a guest) is refused a memory tool and the memory folder."""
    if reach.memory_refusal() is None:
        return None
    if getattr(tool, "reads_memory", False):
        return reach.read_refusal(f"{tool.name} was not run")
    if names_memory(tool.name, args, ctx):
        return reach.read_refusal("the memory folder is closed to its tools")
    return None


def names_memory(tool_name: str, args: dict[str, Any], ctx: ToolContext) -> bool:
    """Does this call name a path in the memory folder?"""
    folder = _folder(ctx)
    if folder is None:
        return False
    if tool_name == "shell":
        return _command_names(str(args.get("command", "")), folder, ctx.workspace)
    return any(_path_names(value, folder, ctx.workspace) for value in _strings(args))


def withheld(ctx: ToolContext) -> Path | None:
    """The folder listings and searches must leave out for the work running now, or None."""
    folder = _folder(ctx)
    if folder is None or reach.read_refusal() is None:
        return None
    return folder


def hides(path: Path, ctx: ToolContext) -> bool:
    """Is `path` in a folder withheld from the work running now: the memory folder for work
    that reads none, and the Hearth home for every work (`workspace.kept_out`)?"""
    if kept_out(path, ctx.workspace, ctx.placement.hidden):
        return True
    folder = withheld(ctx)
    return folder is not None and _within(path, folder)


def sandbox_rule(ctx: ToolContext) -> tuple[str, str] | None:
    """How a sandboxed command started for the work running now sees the memory folder:
    ("hide", path) for work that reads no memory, ("read-only", path) for work that keeps
    none, None otherwise."""
    folder = _folder(ctx)
    kept_from = reach.restricted_mode() is not None or reach.memory_refusal() is not None
    if folder is None or not kept_from or not folder.is_dir():
        return None
    if _relative_name(folder, ctx.workspace) is None:
        return None  # not in the workspace: the sandbox already hides the home it lives in
    return ("hide" if reach.read_refusal() is not None else "read-only", str(folder))


def _folder(ctx: ToolContext) -> Path | None:
    if ctx.memory_dir is None:
        return None
    return Path(os.path.realpath(ctx.memory_dir))


def _within(path: Path, folder: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == folder or folder in real.parents


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _path_names(raw: str, folder: Path, workspace: Path) -> bool:
    if not raw.strip() or "\x00" in raw or len(raw) > 4096:
        return False
    candidate = Path(raw) if raw.startswith("/") else workspace / raw
    if _within(candidate, folder):
        return True
    # a glob pattern that reaches into the folder (memory/*.md, m*/MEMORY.md)
    relative = _relative_name(folder, workspace)
    first = raw.lstrip("./").split("/", 1)[0]
    return bool(relative and first and any(c in first for c in "*?[")
                and fnmatchcase(relative, first))


def _relative_name(folder: Path, workspace: Path) -> str | None:
    """The memory folder's name as a path from the workspace, when it lies inside it."""
    root = Path(os.path.realpath(workspace))
    if root not in folder.parents:
        return None
    return folder.relative_to(root).parts[0]


def _command_names(command: str, folder: Path, workspace: Path) -> bool:
    if str(folder) in command:
        return True
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    relative = _relative_name(folder, workspace)
    for word in words:
        for piece in word.replace("=", " ").replace(">", " ").replace("<", " ").split():
            if _path_names(piece, folder, workspace):
                return True
            if relative and fnmatchcase(relative, piece.lstrip("./").split("/", 1)[0] or "-"):
                return True
    return False
