"""Making a backup: the database's snapshot and the home's files, into one archive.

A backup is background work: the thread that makes one runs at a lower CPU priority
(`lower_priority`, nice 10), and gzip at its fastest level, so turns beside it keep their pace.

The home's backup key is read, or made by its first backup (`keys.py`). The snapshot is taken
first (`store/backup.py`, `store/pg_dump.py`) into a staging folder beside the archives; the
chats it keeps say which chats' folders go in. The archive is written under a temporary name
(`.partial`), each file hashed as it goes in (a small file is read whole first, so what is
hashed is what is written; attachments are never changed once kept), then the manifest and
last its signature with the key; then it is synced, linked to its own name (never over another
file) and the folder synced. A backup killed midway leaves only the `.partial` (a truncated
archive with no manifest, which a verify refuses) and its staging folder, both removed by the
next backup in that folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import shutil
import stat
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import make_url

from hearth import __version__
from hearth.atomic import link_into_place, sync_folder
from hearth.backup import keys, rotation
from hearth.backup.keys import BackupKey
from hearth.backup.manifest import DB_FILES, NAME, SIGNATURE, BackupRefused, Entry, Manifest
from hearth.faults import crash_point
from hearth.home import Home
from hearth.sessions.folders import chat_folder
from hearth.store.backup import Snapshot, SnapshotFailed, snapshot_sqlite
from hearth.store.pg_dump import dump_postgresql

log = logging.getLogger(__name__)

COMPRESSION = 1  # gzip's fastest level: ~7% larger than level 6 at under half its CPU
BACKGROUND_NICE = 10  # a backup is background work: the gateway's turns go first
SMALL = 8 * 1024 * 1024  # a file up to this size is read whole before it goes in
PROMPTS = "prompts"  # the saved prompts' folder in the home (engine/intake/mentions.py)
TEMP_SUFFIXES = (".hearth-tmp",)  # atomic.py's files being written
TEMP_PREFIXES = (".incoming-",)  # an attachment being uploaded


@dataclass(frozen=True)
class Made:
    path: Path
    manifest: Manifest
    seconds: float  # how long it took
    size: int  # the archive's bytes
    key: str  # the id of the backup key that signed it


def make_backup(home: Home, db_url: str, folder: Path) -> Made:
    """A backup of `home` (its database at `db_url`) in `folder`; BackupRefused says why not."""
    begun = time.monotonic()
    staging = rotation.work_name(folder, "staging")
    partial = rotation.work_name(folder, "partial")
    try:
        key = keys.made_for(home.root)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        rotation.sweep_leftovers(folder)
        staging.mkdir(mode=0o700)
        snapshot = _snapshot(db_url, staging)
        manifest = _write_archive(partial, home, snapshot, key)
        path = _place(partial, folder)
    except (SnapshotFailed, OSError, tarfile.TarError) as error:
        raise BackupRefused(f"No backup was made: {_said(error)}") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return Made(path, manifest, time.monotonic() - begun, path.stat().st_size, key.id)


def lower_priority() -> None:
    """Run the calling thread (on Linux a thread has a priority of its own) at a lower CPU
    priority from now on, so a backup beside turns takes what they leave; where the system
    will not, it runs as it is."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       max(os.getpriority(os.PRIO_PROCESS, 0), BACKGROUND_NICE))
    except (OSError, AttributeError):
        log.debug("a backup's priority could not be lowered")


def _said(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}."
    return str(error)


def _snapshot(db_url: str, staging: Path) -> Snapshot:
    where = make_url(db_url)
    backend = where.get_backend_name()
    if backend == "sqlite":
        if not where.database or where.database == ":memory:":
            raise SnapshotFailed("The database is not a file: there is nothing to back up.")
        return snapshot_sqlite(Path(where.database), staging / "hearth.db")
    if backend.startswith("postgres"):
        return dump_postgresql(db_url, staging / "hearth.sql")
    raise SnapshotFailed(f"Hearth cannot back up a {backend} database.")


def _write_archive(partial: Path, home: Home, snapshot: Snapshot, key: BackupKey) -> Manifest:
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=COMPRESSION,
                          format=tarfile.PAX_FORMAT) as tar:
            entries = [_add(tar, DB_FILES[snapshot.engine], snapshot.path)]
            raw.flush()
            crash_point("backup_archiving")
            for name, path in home_files(home, snapshot.kept_chats):
                entry = _add_if_there(tar, name, path)
                if entry is not None:
                    entries.append(entry)
            manifest = Manifest(hearth=__version__, created_at=_utc_now(),
                                engine=snapshot.engine, revision=snapshot.revision,
                                chats=len(snapshot.kept_chats), left_out=snapshot.left_out,
                                files=entries)
            written = manifest.to_json()
            _add_bytes(tar, NAME, written)
            _add_bytes(tar, SIGNATURE, keys.signature(key, written))
        raw.flush()
        os.fsync(raw.fileno())
    return manifest


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _place(partial: Path, folder: Path) -> Path:
    """The finished archive linked to a name of its own (never over another file)."""
    while True:
        path = rotation.free_name(folder, time.time())
        if not link_into_place(partial, path):
            continue
        partial.unlink()
        sync_folder(folder)
        return path


def home_files(home: Home, kept_chats: tuple[str, ...]) -> Iterator[tuple[str, Path]]:
    """(member name, path) of each home file a backup holds, in a stable order."""
    for name in ("config.toml", "settings.json"):
        yield f"home/{name}", home.root / name
    for top in (home.memory_dir, home.agents_dir, home.root / PROMPTS):
        yield from _walk(home.root, top)
    for key in kept_chats:
        try:
            folder = chat_folder(home.sessions_dir, key)
        except ValueError:
            continue  # a key that cannot name a folder never had one
        yield from _walk(home.root, folder)


def _walk(root: Path, top: Path) -> Iterator[tuple[str, Path]]:
    """The regular files under `top` (never through a link), named from `root`."""
    if top.is_symlink() or not top.is_dir():
        return
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(TEMP_SUFFIXES) or name.startswith(TEMP_PREFIXES):
                continue
            path = Path(folder) / name
            member = "home/" + path.relative_to(root).as_posix()
            try:
                member.encode("utf-8")
            except UnicodeEncodeError:
                log.warning("a file whose name is not UTF-8 is left out of the backup")
                continue
            yield member, path


def _add_if_there(tar: tarfile.TarFile, name: str, path: Path) -> Entry | None:
    """Add `path` if it is (still) a regular file; its entry."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            return None
        if found.st_size <= SMALL:
            return _add_bytes(tar, name, handle.read())
        return _add_stream(tar, name, handle, found.st_size)


def _add(tar: tarfile.TarFile, name: str, path: Path) -> Entry:
    with open(path, "rb") as handle:
        return _add_stream(tar, name, handle, os.fstat(handle.fileno()).st_size)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> Entry:
    tar.addfile(_info(name, len(data)), io.BytesIO(data))
    return Entry(name, len(data), hashlib.sha256(data).hexdigest())


def _add_stream(tar: tarfile.TarFile, name: str, handle: BinaryIO, size: int) -> Entry:
    hashing = _Hashing(handle)
    tar.addfile(_info(name, size), hashing)
    return Entry(name, size, hashing.digest.hexdigest())


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    info.mtime = int(time.time())
    info.type = tarfile.REGTYPE
    return info


class _Hashing:
    """A file read through, hashing what is read."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data
