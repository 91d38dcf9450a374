"""A chat's own working folder, and which folder its tools work in.

Every chat may have a folder of its own, `<home>/sessions/<key>/`; deleting the chat removes
it. A Temporary chat (forgotten when it ends) made without a `workspace_dir` works in
`<key>/workspace` inside it, made when its first turn or tool call needs it, so nothing it
writes outlives it. Other chats work in the folder they were given, else the shared default
workspace. A chat whose recorded mode this build cannot read keeps nothing of memory
(`privacy`) but is not destroyed by a build that cannot say what it is: it is kept as
recorded (a later version may know it).
"""

from __future__ import annotations

from pathlib import Path

from hearth.privacy.modes import Mode, mode_of
from hearth.store.sessions import SessionRow

OWN_WORKSPACE = "workspace"


def forgotten_when_ended(memory_mode: object) -> bool:
    """Is a chat in this recorded mode forgotten when it ends (Temporary)?"""
    return mode_of(memory_mode) is Mode.TEMPORARY


def chat_folder(chats_dir: Path, key: str) -> Path:
    """`<chats_dir>/<key>`; refuses a key that would name anything but a child of it."""
    folder = chats_dir / key
    if not key or key in (".", "..") or folder.parent != chats_dir or "/" in key or "\\" in key:
        raise ValueError(f"{key!r} cannot name a chat's folder")
    return folder


def workspace_for(session: SessionRow, chats_dir: Path, default: Path) -> Path:
    """The folder this chat's tools work in (made here when it is the chat's own)."""
    if session.workspace_dir:
        return Path(session.workspace_dir)
    if not forgotten_when_ended(session.memory_mode):
        return default
    own = chat_folder(chats_dir, session.key) / OWN_WORKSPACE
    own.mkdir(parents=True, exist_ok=True)
    return own
