"""Backups' names, where they go, the newest kept, and what a killed backup left.

An archive is named `hearth-backup-YYYYMMDD-HHMMSS.tar.gz` by the UTC time it was made
(`-2`, `-3`… when one of that second is there), so names sort by age. Only names of that
pattern are ever counted or deleted: rotation keeps the newest `keep` of them and touches
nothing else in the folder. A backup's work in progress is named after its process
(`.hearth-backup-<pid>-<random>.staging` and `.partial`); one whose process is gone (killed
midway) is removed by the next backup made in that folder.
"""

from __future__ import annotations

import calendar
import contextlib
import logging
import os
import re
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "hearth-backup-"
SUFFIX = ".tar.gz"
FOLDER = "backups"  # in the home, unless [backup] to says otherwise
_ARCHIVE = re.compile(r"^hearth-backup-(\d{8})-(\d{6})(?:-(\d+))?\.tar\.gz$")
_WORK = re.compile(r"^\.hearth-backup-(\d+)-[0-9a-f]+\.(?:staging|partial)$")


def folder_for(home_root: Path, to: str | Path | None) -> Path:
    """Where backups go: `to` (`~` expanded; a relative path is in the home), else
    `<home>/backups`."""
    if to is None or str(to) == "":
        return home_root / FOLDER
    given = Path(to).expanduser()
    return given if given.is_absolute() else home_root / given


def stamp(when: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(when))


def free_name(folder: Path, when: float) -> Path:
    """The name for an archive made at `when` that no file in `folder` has."""
    base = f"{PREFIX}{stamp(when)}"
    path = folder / f"{base}{SUFFIX}"
    count = 1
    while path.exists():
        count += 1
        path = folder / f"{base}-{count}{SUFFIX}"
    return path


def archives(folder: Path) -> list[Path]:
    """The archives in `folder` named as Hearth names them, oldest first."""
    try:
        names = [name for name in os.listdir(folder) if _ARCHIVE.match(name)]
    except FileNotFoundError:
        return []
    return [folder / name for name in sorted(names, key=_order)]


def _order(name: str) -> tuple[str, str, int]:
    found = _ARCHIVE.match(name)
    assert found is not None
    return found.group(1), found.group(2), int(found.group(3) or 1)


def made_at(path: Path) -> float:
    """When the archive at `path` was made, by its name (UTC)."""
    found = _ARCHIVE.match(path.name)
    assert found is not None
    return float(calendar.timegm(time.strptime(found.group(1) + found.group(2), "%Y%m%d%H%M%S")))


def newest_made(folder: Path) -> float | None:
    """When the newest archive in `folder` was made (None: there is none)."""
    found = archives(folder)
    return made_at(found[-1]) if found else None


def rotate(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` archives in `folder`; the ones deleted."""
    found = archives(folder)
    gone = found[:-keep] if keep > 0 else found
    for path in gone:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return gone


def work_name(folder: Path, kind: str) -> Path:
    """A name for this process's work in progress (`staging` or `partial`)."""
    return folder / f".{PREFIX}{os.getpid()}-{os.urandom(6).hex()}.{kind}"


def sweep_leftovers(folder: Path) -> int:
    """Remove what backups killed midway left in `folder` (their process is gone)."""
    removed = 0
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        found = _WORK.match(name)
        if found is None or _alive(int(found.group(1))):
            continue
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        removed += 1
    if removed:
        log.info("removed %d piece(s) of backups that were stopped midway", removed)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
