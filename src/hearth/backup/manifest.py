"""A backup's manifest (`manifest.json`) and its signature (`manifest.hmac`, the archive's
last member), and the refusal every step of a backup says its trouble with.

The manifest says what the archive is (`format`, `version`), which Hearth made it and when,
the database's engine, schema revision and file, how many chats it keeps and left out, and
for every other member its path, size and sha256. `parse` refuses anything else: another
format, a version this Hearth does not know, a path a restore could not write safely.

The signature is `{"key": <the key's id>, "hmac_sha256": <hex>}`: HMAC-SHA256 over the
manifest's exact bytes with the home's backup key (`keys.py`). Since the manifest holds every
other member's sha256, the signature vouches for the whole archive. `keys.authenticate`
checks it before the manifest is read, and says which key an archive needs when it is not the
one given.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

FORMAT = "hearth-backup"
VERSION = 2  # 2: signed (manifest.hmac)
NAME = "manifest.json"
SIGNATURE = "manifest.hmac"
MAX_SIGNATURE_BYTES = 4096
MAX_BYTES = 64 * 1024 * 1024  # a manifest larger than this is not one Hearth wrote
ROOTS = ("db", "home")  # every member but the manifest is under one of these
DB_FILES = {"sqlite": "db/hearth.db", "postgresql": "db/hearth.sql"}


class BackupRefused(Exception):
    """A backup, verify or restore that cannot be done; the message is the sentence."""


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    hearth: str  # the version that made it
    created_at: str  # ISO 8601, UTC
    engine: str  # "sqlite" | "postgresql"
    revision: str | None  # the database's Alembic revision
    chats: int  # the chats it keeps
    left_out: int  # chats that keep nothing, left out
    files: list[Entry] = field(default_factory=list)

    @property
    def db_file(self) -> str:
        return DB_FILES[self.engine]

    @property
    def size(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_json(self) -> bytes:
        body = {"format": FORMAT, "version": VERSION, **asdict(self),
                "database": {"engine": self.engine, "revision": self.revision,
                             "file": self.db_file}}
        for moved in ("engine", "revision"):
            body.pop(moved)
        return json.dumps(body, indent=1, sort_keys=True).encode("utf-8")


def safe_path(name: str) -> str | None:
    """Why `name` is not a member a restore may write (None: it may)."""
    path = PurePosixPath(name)
    if not name or "\\" in name or "\x00" in name or path.is_absolute():
        return "an absolute or malformed path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a path that climbs out of its folder"
    if name not in (NAME, SIGNATURE) and path.parts[0] not in ROOTS:
        return "a path outside db/ and home/"
    return None


def parse(data: bytes) -> Manifest:
    """The manifest in `data`, or BackupRefused saying what is wrong with it."""
    try:
        body = json.loads(data)
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise BackupRefused("its manifest is not a Hearth backup's")
        if body.get("version") != VERSION:
            raise BackupRefused(f"its format version ({body.get('version')!r}) is not one "
                                "this Hearth reads: restore it with the version that made it")
        return _manifest(body)
    except (ValueError, KeyError, TypeError) as error:
        raise BackupRefused(f"its manifest cannot be read ({type(error).__name__})") from None


def _manifest(body: dict[str, Any]) -> Manifest:
    database = body["database"]
    engine = str(database["engine"])
    if engine not in DB_FILES or database.get("file") != DB_FILES[engine]:
        raise BackupRefused(f"its manifest names a database Hearth does not know ({engine!r})")
    entries = [Entry(str(e["path"]), int(e["size"]), str(e["sha256"])) for e in body["files"]]
    for entry in entries:
        why = safe_path(entry.path)
        if why is not None or entry.path in (NAME, SIGNATURE):
            raise BackupRefused(f"its manifest lists {entry.path[:200]!r}: "
                                f"{why or 'the manifest itself'}")
    if len({entry.path for entry in entries}) != len(entries):
        raise BackupRefused("its manifest lists a file twice")
    if DB_FILES[engine] not in {entry.path for entry in entries}:
        raise BackupRefused("its manifest lists no database")
    revision = database.get("revision")
    return Manifest(hearth=str(body["hearth"]), created_at=str(body["created_at"]),
                    engine=engine, revision=None if revision is None else str(revision),
                    chats=int(body["chats"]), left_out=int(body["left_out"]), files=entries)
