"""Reading a backup: every member checked against the manifest, and the database opened.

The archive is read once, as a stream (gzip or plain tar): each member must be a regular file
with a path a restore may write (no `..`, no absolute path, nothing outside `db/` and
`home/`; no link, folder or device), never twice; its bytes are hashed as they pass and,
when a folder is given, written there (`O_EXCL`, owner-only). The manifest comes last; then
every file it lists must have been seen with its size and sha256, and nothing else.
Anything else — a truncated or corrupted file, a foreign tar, a checksum that differs — is a
`BackupRefused` with the sentence. `verify` also opens the database: SQLite's
`PRAGMA integrity_check` on the snapshot, or the dump's first and last lines.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from hearth.backup.manifest import (
    MAX_BYTES,
    NAME,
    BackupRefused,
    Entry,
    Manifest,
    parse,
    safe_path,
)
from hearth.store.backup import check_sqlite
from hearth.store.pg_dump import check_dump

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Verified:
    path: Path
    manifest: Manifest


def verify(path: Path) -> Verified:
    """Check the archive at `path` whole (BackupRefused says what is wrong)."""
    with _scratch(path.parent) as folder:
        manifest = read_archive(path, Path(folder), lambda name: name.startswith("db/"))
        check_database(manifest, Path(folder))
    return Verified(path, manifest)


def _scratch(beside: Path) -> tempfile.TemporaryDirectory[str]:
    """A private scratch folder beside the archive (else in the system's)."""
    try:
        return tempfile.TemporaryDirectory(prefix=".hearth-verify-", dir=beside)
    except OSError:
        return tempfile.TemporaryDirectory(prefix="hearth-verify-")


def check_database(manifest: Manifest, folder: Path) -> None:
    """The database file read out into `folder` opens and is the one the manifest says."""
    where = folder / manifest.db_file
    if manifest.engine == "sqlite":
        problem, revision = check_sqlite(where)
        if problem is None and revision != manifest.revision:
            problem = (f"its database is at migration {revision}, its manifest says "
                       f"{manifest.revision}")
    else:
        problem = check_dump(where)
    if problem is not None:
        raise BackupRefused(problem)


def read_archive(path: Path, into: Path | None = None,
                 keep: Callable[[str], bool] = lambda name: True) -> Manifest:
    """Read the archive at `path` through, checking it whole; the members `keep` names are
    written under `into`. BackupRefused (with what is wrong) for anything but a whole,
    unaltered backup."""
    if not path.is_file():
        raise BackupRefused(f"There is no file at {path}.")
    seen: dict[str, Entry] = {}
    manifest: Manifest | None = None
    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                if manifest is not None:
                    raise BackupRefused("it holds files after its manifest")
                _check_member(member, seen)
                source = tar.extractfile(member)
                assert source is not None  # a regular file's
                if member.name == NAME:
                    manifest = parse(_read_manifest(source, member.size))
                    continue
                target = into / member.name if into is not None and keep(member.name) else None
                seen[member.name] = _read_member(source, member, target)
    except BackupRefused as refused:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: {refused}") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: it is not a whole "
                            f"archive ({_why(error)}).") from None
    if manifest is None:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: it has no "
                            "manifest (not a Hearth backup, or cut short).")
    _match(path, manifest, seen)
    return manifest


def _why(error: BaseException) -> str:
    said = str(error).strip() or type(error).__name__
    return said[:200]


def _check_member(member: tarfile.TarInfo, seen: dict[str, Entry]) -> None:
    why = safe_path(member.name)
    if why is not None:
        raise BackupRefused(f"it holds {member.name[:200]!r}, {why}")
    if not member.isreg():
        raise BackupRefused(f"it holds {member.name[:200]!r}, which is not a plain file "
                            "(a link, folder or device)")
    if member.name in seen:
        raise BackupRefused(f"it holds {member.name[:200]!r} twice")


def _read_manifest(source: IO[bytes], size: int) -> bytes:
    if size > MAX_BYTES:
        raise BackupRefused("its manifest is too large to be one Hearth wrote")
    return source.read()


def _read_member(source: IO[bytes], member: tarfile.TarInfo, target: Path | None) -> Entry:
    digest = hashlib.sha256()
    size = 0
    out = _create(target) if target is not None else None
    try:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if out is not None:
                out.write(chunk)
    finally:
        if out is not None:
            out.close()
    return Entry(member.name, size, digest.hexdigest())


def _create(target: Path) -> BinaryIO:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return os.fdopen(fd, "wb")


def _match(path: Path, manifest: Manifest, seen: dict[str, Entry]) -> None:
    """Every file the manifest lists was seen as it says, and nothing else."""
    listed = {entry.path: entry for entry in manifest.files}
    for name, entry in listed.items():
        found = seen.get(name)
        if found is None:
            raise BackupRefused(f"{path.name} is not a backup Hearth can use: {name[:200]!r}, "
                                "in its manifest, is missing from it.")
        if found != entry:
            raise BackupRefused(f"{path.name} is not a backup Hearth can use: {name[:200]!r} "
                                "does not match its checksum (the file was altered or "
                                "damaged).")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: it holds "
                            f"{extra[0][:200]!r}, which its manifest does not list.")
