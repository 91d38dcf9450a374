"""Confinement to the chat's workspace folder.

A path the model names is taken relative to the workspace. It is refused when it is absolute
and outside, when it contains a `..` part, or when it resolves (through any symlink) outside.
It is refused too when it lies in a folder kept out of every workspace (the Hearth home: its
token, config and database), whatever the workspace: a workspace inside the home reaches only
itself, and one that contains the home (made before such workspaces were refused) does not
reach the home inside it (`kept_out`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from hearth.tools.base import ToolRefused


def resolve_inside(workspace: Path, raw: str, keep_out: tuple[str, ...] = ()) -> Path:
    """The real path `raw` names inside `workspace` and outside every `keep_out` folder, or
    ToolRefused saying why not."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolRefused("The path is empty; name a file or folder inside the workspace.")
    if "\x00" in raw:
        raise ToolRefused("The path contains a NUL character, which no file name can hold.")
    root = workspace.resolve()
    candidate = PurePosixPath(raw)
    if ".." in candidate.parts:
        raise ToolRefused(
            f"Refused {raw!r}: paths may not contain '..'; name the file from the workspace root."
        )
    target = Path(raw) if candidate.is_absolute() else root / raw
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, an unreadable folder
        raise ToolRefused(f"Refused {raw!r}: the path cannot be resolved ({exc}).") from exc
    if resolved != root and root not in resolved.parents:
        if target.is_symlink() or _has_symlink_between(root, target):
            raise ToolRefused(
                f"Refused {raw!r}: it is a symlink that points outside the workspace ({root})."
            )
        raise ToolRefused(f"Refused {raw!r}: it is outside the workspace ({root}).")
    if kept_out(resolved, root, keep_out):
        raise ToolRefused(f"Refused {raw!r}: it is in the Hearth home, which holds the "
                          "gateway's token, keys and database and is never part of a workspace.")
    return resolved


def kept_out(path: Path, workspace: Path, keep_out: tuple[str, ...]) -> bool:
    """Is `path` in a kept-out folder the workspace itself is not inside?"""
    root = Path(os.path.realpath(workspace))
    real = Path(os.path.realpath(path))
    for raw in keep_out:
        folder = Path(os.path.realpath(raw))
        if _under(real, folder) and not _under(root, folder):
            return True
    return False


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _has_symlink_between(root: Path, target: Path) -> bool:
    try:
        relative = target.relative_to(root)
    except ValueError:
        return False
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            return True
    return False


def display(workspace: Path, path: Path) -> str:
    """The path as the workspace-relative name a receipt shows."""
    root = workspace.resolve()
    return "." if path == root else str(path.relative_to(root))
