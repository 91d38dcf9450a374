"""Reading a backup: the manifest's signature checked, every member checked against the
manifest, and the database opened and its schema compared with the migrations'.

The archive is read once, as a stream (gzip or plain tar): each member must be a regular file
with a path a restore may write (no `..`, no absolute path, nothing outside `db/` and
`home/`; no link, folder or device), never twice; its bytes are hashed as they pass and,
when a folder is given, written there (`O_EXCL`, owner-only). The manifest comes next to
last, its signature last: the signature must be the given backup key's (`keys.authenticate`)
before the manifest is read, then every file it lists must have been seen with its size and
sha256, and nothing else. Anything else — a truncated or corrupted file, a foreign tar, a
checksum that differs, a manifest changed, another home's archive without that home's key —
is a `BackupRefused` with the sentence. `check_database` opens the database: SQLite's
`PRAGMA integrity_check` on the snapshot and its schema, entry by entry, against the one this
Hearth's migrations make at its revision (`store/schema_check.py`: no table, index, view or
trigger more or less); a dump's first and last lines, and nothing in it but data.
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

from hearth.backup.keys import KeyFile, authenticate
from hearth.backup.manifest import (
    MAX_BYTES,
    MAX_SIGNATURE_BYTES,
    NAME,
    SIGNATURE,
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


def verify(path: Path, key: KeyFile) -> Verified:
    """Check the archive at `path` whole, signed with `key` (BackupRefused says what is
    wrong)."""
    with _scratch(path.parent) as folder:
        manifest = read_archive(path, Path(folder), lambda name: name.startswith("db/"),
                                key=key)
        check_database(manifest, Path(folder), path.name)
    return Verified(path, manifest)


def _scratch(beside: Path) -> tempfile.TemporaryDirectory[str]:
    """A private scratch folder beside the archive (else in the system's)."""
    try:
        return tempfile.TemporaryDirectory(prefix=".hearth-verify-", dir=beside)
    except OSError:
        return tempfile.TemporaryDirectory(prefix="hearth-verify-")


def check_database(manifest: Manifest, folder: Path, name: str) -> None:
    """The database file read out into `folder` (from the archive called `name`) opens, has
    this Hearth's schema and is the one the manifest says."""
    where = folder / manifest.db_file
    if manifest.engine == "sqlite":
        problem, revision = check_sqlite(where)
        if problem is None and revision != manifest.revision:
            problem = (f"its database is at migration {revision}, its manifest says "
                       f"{manifest.revision}")
    else:
        problem = check_dump(where)
    if problem is not None:
        raise BackupRefused(f"{name} is not a backup Hearth can use: {problem}.")


def read_archive(path: Path, into: Path | None = None,
                 keep: Callable[[str], bool] = lambda name: True, *, key: KeyFile) -> Manifest:
    """Read the archive at `path` through, checking it whole and its manifest signed with
    `key`; the members `keep` names are written under `into`. BackupRefused (with what is
    wrong) for anything but a whole, unaltered backup."""
    if not path.is_file():
        raise BackupRefused(f"There is no file at {path}.")
    seen: dict[str, Entry] = {}
    try:
        with tarfile.open(path, mode="r|*") as tar:
            raw, signed = _read_members(tar, seen, into, keep)
        if raw is None:
            raise BackupRefused("it has no manifest (not a Hearth backup, or cut short).")
        authenticate(raw, signed, key)
        manifest = parse(raw)
    except BackupRefused as refused:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: {refused}") from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise BackupRefused(f"{path.name} is not a backup Hearth can use: it is not a whole "
                            f"archive ({_why(error)}).") from None
    _match(path, manifest, seen)
    return manifest


def _read_members(tar: tarfile.TarFile, seen: dict[str, Entry], into: Path | None,
                  keep: Callable[[str], bool]) -> tuple[bytes | None, bytes | None]:
    """Every member read (the files into `seen`, those `keep` names written under `into`);
    the manifest's bytes and its signature's, which come last, in that order."""
    raw: bytes | None = None
    signed: bytes | None = None
    for member in tar:
        if signed is not None:
            raise BackupRefused("it holds files after its signature")
        _check_member(member, seen)
        source = tar.extractfile(member)
        assert source is not None  # a regular file's
        if member.name == SIGNATURE and raw is not None:
            signed = _read_small(source, member.size, MAX_SIGNATURE_BYTES, "signature")
        elif raw is not None:
            raise BackupRefused("it holds files after its manifest")
        elif member.name == NAME:
            raw = _read_small(source, member.size, MAX_BYTES, "manifest")
        elif member.name == SIGNATURE:
            raise BackupRefused("its signature comes before its manifest")
        else:
            target = into / member.name if into is not None and keep(member.name) else None
            seen[member.name] = _read_member(source, member, target)
    return raw, signed


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


def _read_small(source: IO[bytes], size: int, limit: int, what: str) -> bytes:
    if size > limit:
        raise BackupRefused(f"its {what} is too large to be one Hearth wrote")
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
