"""Backups for tests: a home with chats and files to back up (`filled_home`), an archive read
as its bytes (`plain_bytes`: the tar, decompressed, where a word is looked for), re-packed
with a change (`repack`), a tar of members of one's own (`write_tar`, for foreign and
hostile archives), and every file in a folder verify accepts (`accepted`)."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path

from hearth.backup.manifest import BackupRefused
from hearth.backup.reading import verify
from hearth.store import sessions as session_store, transcript
from hearth.store.db import Database
from tests.support.store import seed

Chats = Mapping[str, tuple[str, list[str]]]  # key: (memory mode, what the user said)


def add_chats(db: Database, chats: Chats) -> None:
    """Each chat made in `db` with its messages (the user's, as the store keeps them)."""
    with db.write() as conn:
        for key, (mode, texts) in chats.items():
            session_store.insert(conn, key=key, tab_id=f"tab-{key}", memory_mode=mode,
                                 chat_number=None)
            for text in texts:
                transcript.append(conn, key, "user", {"text": text})


def filled_home(home: Path, chats: Chats, files: Mapping[str, bytes] | None = None) -> None:
    """`home` with a store holding `chats` and the files `files` names (relative to it)."""
    seed(home / "hearth.db")
    db = Database(f"sqlite:///{home / 'hearth.db'}")
    try:
        add_chats(db, chats)
    finally:
        db.close()
    for name, data in (files or {}).items():
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def plain_bytes(archive: Path) -> bytes:
    """The archive's bytes as a reader of the disk would find them: decompressed."""
    data = archive.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return tar.getnames()


def repack(archive: Path, out: Path, change: Callable[[str, bytes], bytes | None]) -> None:
    """`archive`'s members written to `out` (gzip) with `change` applied to each one's bytes
    (None leaves the member out)."""
    with tarfile.open(archive) as tar, tarfile.open(out, "w:gz") as packed:
        for member in tar.getmembers():
            source = tar.extractfile(member)
            assert source is not None
            data = change(member.name, source.read())
            if data is None:
                continue
            member.size = len(data)
            packed.addfile(member, io.BytesIO(data))


def write_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    """A gzipped tar of `entries` (a member and its bytes, None for one with no data)."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def file_member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o600
    return info


def accepted(folder: Path) -> list[Path]:
    """Every file under `folder` that verify accepts as a whole backup."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        try:
            verify(path)
        except BackupRefused:
            continue
        found.append(path)
    return found
