"""Backups for tests: a home with chats and files to back up (`filled_home`), an archive read
as its bytes (`plain_bytes`: the tar, decompressed, where a word is looked for), re-packed
with a change (`repack`; `resigned`, its manifest re-made to match and signed again with the
key: what only someone holding the key could do), a tar of members of one's own (`write_tar`,
for foreign and hostile archives), a home's backup key (`key_of`) and every file in a folder
verify accepts (`accepted`)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hearth.backup import keys
from hearth.backup.keys import KeyFile
from hearth.backup.manifest import NAME, SIGNATURE, BackupRefused
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


def key_of(home: Path) -> KeyFile:
    """The backup key of the home at `home` (its first backup made it)."""
    return keys.read(keys.key_path(home))


def resigned(archive: Path, out: Path, change: Callable[[str, bytes], bytes | None],
             key: KeyFile, added: Mapping[str, bytes] | None = None,
             relabel: Callable[[dict[str, Any]], None] | None = None) -> None:
    """`archive`'s members with `change` applied (as `repack`) and `added` after them, then a
    manifest re-made to list them as they are (`relabel` changing the rest of it), signed
    again with `key`."""
    with tarfile.open(archive) as tar:
        members = [(member, _bytes_of(tar, member)) for member in tar.getmembers()]
    kept = []
    for member, data in members:
        found = None if member.name in (NAME, SIGNATURE) else change(member.name, data)
        if found is not None:
            kept.append((member, found))
    kept += [(file_member(name), data) for name, data in (added or {}).items()]
    body = json.loads(dict((m.name, data) for m, data in members)[NAME])
    if relabel is not None:
        relabel(body)
    body["files"] = [{"path": m.name, "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()} for m, data in kept]
    manifest = json.dumps(body).encode()
    assert key.key is not None
    write_tar(out, [*kept, (file_member(NAME), manifest),
                    (file_member(SIGNATURE), keys.signature(key.key, manifest))])


def _bytes_of(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    source = tar.extractfile(member)
    assert source is not None
    return source.read()


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


def accepted(folder: Path, key: KeyFile) -> list[Path]:
    """Every file under `folder` that verify accepts as a whole backup signed with `key`."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        try:
            verify(path, key)
        except BackupRefused:
            continue
        found.append(path)
    return found
