"""The one way Hearth writes a whole file: settings.json, the token, the memory documents and
the files the agent's tools write.

A fresh temporary file beside the target (opened O_EXCL, so it never writes through a link
someone left at its name), the bytes written and synced, then renamed over the target (or
linked into place when the first writer must win) and the folder synced, so a reader sees the
old file or the new one, never half of one, and a crash or a power loss keeps one of the two.
It imports nothing of Hearth: every layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".hearth-tmp"


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600,
                     keep_mode: bool = False, first_wins: bool = False) -> bool:
    """Make `path` hold exactly `data`. `mode` for a new file (with `keep_mode`, an existing
    file keeps its own); with `first_wins`, a file already at `path` is left as it is and
    False is returned. True when `data` is now at `path`."""
    if keep_mode:
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        placed = _link(tmp, path) if first_wins else _replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    if placed:
        sync_folder(path.parent)
    return placed


@contextlib.contextmanager
def streaming_atomically(path: Path, *, mode: int = 0o600) -> Iterator[BinaryIO]:
    """`write_atomically` for bytes that come a piece at a time (an export): a handle on the
    temporary file, put in place whole once the block ends, and removed if it raises."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    sync_folder(path.parent)


def link_into_place(done: Path, path: Path) -> bool:
    """Put a file written and synced in full elsewhere in the same folder (a backup's
    `.partial`) at `path`, never over a file already there (False then), the folder synced."""
    placed = _link(str(done), path)
    if placed:
        sync_folder(path.parent)
    return placed


NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP)


def link_or_copy_into_place(source: Path, path: Path) -> None:
    """A second name at `path` for the file at `source` (a hard link), or a synced copy where
    the filesystem refuses links; put in place whole, the folder synced."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        try:
            os.link(source, tmp)
        except OSError as error:
            if error.errno not in NO_LINK:
                raise
            with open(source, "rb") as reading, open(tmp, "xb") as writing:
                shutil.copyfileobj(reading, writing)
                writing.flush()
                os.fsync(writing.fileno())
        _replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    sync_folder(path.parent)


def _replace(tmp: str, path: Path) -> bool:
    os.replace(tmp, path)
    return True


def _link(tmp: str, path: Path) -> bool:
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    return True


def sync_folder(folder: Path) -> None:
    """Make the rename itself durable (a no-op where a folder cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
