"""Restoring a backup into a new home: all of it, or nothing.

The home must not exist yet, or be an empty folder. The archive is read whole into a staging
folder beside it (`reading.read_archive`: its signature by the given backup key, every
checksum, every path, no link) and its database opened and its schema checked; only then is
anything put in place. SQLite's snapshot becomes the home's
`hearth.db`; a PostgreSQL dump is loaded into the empty database `HEARTH_DATABASE_URL` names
(`store/pg_dump.py`). The backup key that vouched for the archive becomes the new home's
`backup.key`, so its own backups are signed as its archives were. Last, the staging folder's
home is renamed to the home's name. Whatever
refuses on the way, the staging folder (and any parent folder made for it) is removed: the
home is as it was. The token is not in a backup: the restored gateway makes a new one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hearth.backup import keys
from hearth.backup.keys import KeyFile
from hearth.backup.manifest import BackupRefused, Manifest
from hearth.backup.reading import check_database, read_archive
from hearth.store.backup import SnapshotFailed
from hearth.store.pg_dump import restore_postgresql


@dataclass(frozen=True)
class Restored:
    home: Path
    manifest: Manifest
    database: str  # where the database went, in words


def restore(archive: Path, home: Path, db_url: str | None, key: KeyFile) -> Restored:
    """Restore `archive`, signed with `key`, into the new home `home` (its PostgreSQL
    database into `db_url`)."""
    home = home.expanduser().absolute()
    _refuse_unless_empty(home)
    made = _make_parents(home.parent)
    staging = home.parent / f".{home.name}.restoring-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        staging.mkdir(mode=0o700)
        manifest = read_archive(archive, staging, key=key)
        check_database(manifest, staging, archive.name)
        database = _put_database(manifest, staging, home, db_url)
        assert key.key is not None  # it vouched for the archive
        keys.keep_in(staging / "home", key.key)
        _put_home(staging / "home", home)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return Restored(home, manifest, database)


def _refuse_unless_empty(home: Path) -> None:
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        raise BackupRefused(f"{home} is not a folder: restore into a new or empty folder.")
    if home.is_dir() and any(home.iterdir()):
        raise BackupRefused(f"{home} is not empty: restore into a new or empty folder "
                            "(nothing was written).")


def _make_parents(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; those made, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir(mode=0o700)
    return list(reversed(missing))


def _put_database(manifest: Manifest, staging: Path, home: Path, db_url: str | None) -> str:
    (staging / "home").mkdir(mode=0o700, exist_ok=True)
    snapshot = staging / manifest.db_file
    if manifest.engine == "sqlite":
        snapshot.rename(staging / "home" / "hearth.db")
        return str(home / "hearth.db")
    if not db_url or not db_url.startswith("postgres"):
        raise BackupRefused("This backup's database is PostgreSQL's: set HEARTH_DATABASE_URL "
                            "to a new, empty PostgreSQL database to restore it into "
                            "(nothing was written).")
    try:
        restore_postgresql(db_url, snapshot, manifest.revision)
    except SnapshotFailed as failed:
        raise BackupRefused(f"{failed} (no file was written)") from None
    return "the PostgreSQL database HEARTH_DATABASE_URL names"


def _put_home(staged: Path, home: Path) -> None:
    if home.is_dir():
        home.rmdir()  # empty: checked first
    staged.rename(home)
    home.chmod(0o700)
    fd = os.open(home.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
