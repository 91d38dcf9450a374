"""A file one chat holds put in another chat's folder too, by reference: a hard link.

A fork holds its parent's files, and an imported chat the files its import staged
(`engine/operations/branching.py`, `engine/operations/importing.py`). Each chat's folder
keeps its files by their SHA-256 (`sessions/attachments.py`), so a second chat holding the
same file is a second name for the same bytes: `os.link`, no byte copied. Deleting one chat
removes its name (`sessions/forget.py` removes its folder); the bytes go when the last chat
holding them goes. Where the filesystem refuses a link (one without hard links, a folder on
another device) the file is copied instead, synced, so the chat holds it all the same.
Blocking: call from a thread (or the writer's, inside the transaction that names the file).
"""

from __future__ import annotations

from pathlib import Path

from hearth.atomic import link_or_copy_into_place


def share(source: Path, folder: Path) -> bool:
    """The file at `source` also in `folder` under its own name (a hash); whether a new name
    was made (False: `folder` held it already). FileNotFoundError when `source` is gone."""
    target = folder / source.name
    if target.exists():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    link_or_copy_into_place(source, target)
    return True
