"""The backup key: the secret a backup's manifest is signed with, kept in the home and never
in an archive.

`<home>/backup.key` (0600) holds 32 random bytes, as 64 hex digits; the first backup of a home
makes it (`made_for`), and every backup of that home signs its manifest with it: HMAC-SHA256
over the manifest's bytes, in the archive's last member (`manifest.py`, `SIGNATURE`). A verify
or a restore checks the signature with the key it is given (`read`: this home's, or the file
`--key` names), so an archive changed by anyone without the key (a file, the manifest, a
trigger planted in the database) is refused. A key is named by its id, the first 16 hex digits
of a hash of it (safe to show: it says nothing of the key), so a refusal can say which key an
archive needs. To restore on another machine, copy the home's `backup.key` there (or keep it
with the archives, apart from them); a restore puts the key it used in the restored home.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

from hearth.atomic import link_into_place
from hearth.backup.manifest import SIGNATURE, BackupRefused

FILE = "backup.key"
SECRET_BYTES = 32
_ID_SALT = b"hearth backup key id\x00"


@dataclass(frozen=True)
class BackupKey:
    secret: bytes

    @property
    def id(self) -> str:
        """What names the key in a sentence (a hash of it, never the key)."""
        return hashlib.sha256(_ID_SALT + self.secret).hexdigest()[:16]

    def sign(self, data: bytes) -> str:
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def signed(self, data: bytes, signature: str) -> bool:
        """Is `signature` this key's of `data`?"""
        return hmac.compare_digest(self.sign(data), signature)


@dataclass(frozen=True)
class KeyFile:
    """Where a key was looked for, and the key found there (None: no file there)."""

    path: Path
    key: BackupKey | None


def key_path(home_root: Path) -> Path:
    return home_root / FILE


def read(path: Path) -> KeyFile:
    """The key in the file at `path` (none there: `key` is None); BackupRefused for a file
    that is not a backup key."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return KeyFile(path, None)
    except (OSError, UnicodeDecodeError) as error:
        raise BackupRefused(f"The backup key {path} cannot be read ({error}).") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != SECRET_BYTES:
        raise BackupRefused(f"{path} is not a backup key (64 hex digits, as a backup writes "
                            "it).")
    return KeyFile(path, BackupKey(secret))


def made_for(home_root: Path) -> BackupKey:
    """The home's backup key, made now if it has none (0600, whole or not at all)."""
    found = read(key_path(home_root)).key
    if found is not None:
        return found
    keep_in(home_root, BackupKey(secrets.token_bytes(SECRET_BYTES)))
    made = read(key_path(home_root)).key  # another backup may have made it first: theirs
    assert made is not None
    return made


def keep_in(home_root: Path, key: BackupKey) -> None:
    """`key` as the home's backup key, unless the home has one already (never replaced)."""
    home_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = home_root / f".{FILE}-{uuid.uuid4().hex}.hearth-tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key.secret.hex() + "\n")
            out.flush()
            os.fsync(out.fileno())
        link_into_place(temp, key_path(home_root))  # (the folder synced)
    finally:
        temp.unlink(missing_ok=True)


def signature(key: BackupKey, manifest: bytes) -> bytes:
    """The archive's `manifest.hmac`: the key's id and its HMAC of the manifest's bytes."""
    return json.dumps({"key": key.id, "hmac_sha256": key.sign(manifest)}).encode("ascii")


def authenticate(manifest: bytes, signed: bytes | None, given: KeyFile) -> None:
    """The manifest is the one the key of `given` signed; BackupRefused says what is wrong,
    and, for another key, which one the archive needs."""
    if signed is None:
        raise BackupRefused(f"it is not signed (no {SIGNATURE}): not a backup this Hearth "
                            "made, a backup made before backups were signed, or one cut "
                            "short")
    key_id, mac = _signature_of(signed)
    if given.key is None:
        raise BackupRefused(f"it is signed with backup key {key_id}, and there is no backup "
                            f"key at {given.path}: give the backup.key of the home that made "
                            "it with --key FILE")
    if given.key.id != key_id:
        raise BackupRefused(f"it is signed with backup key {key_id}, not with the key at "
                            f"{given.path} ({given.key.id}): give the backup.key of the home "
                            "that made it with --key FILE")
    if not given.key.signed(manifest, mac):
        raise BackupRefused("its manifest does not match its signature (the manifest was "
                            "altered, or the archive was put together by someone without "
                            "its key)")


def _signature_of(signed: bytes) -> tuple[str, str]:
    try:
        body = json.loads(signed)
        key_id, mac = body["key"], body["hmac_sha256"]
    except (ValueError, KeyError, TypeError):
        raise BackupRefused(f"its signature ({SIGNATURE}) cannot be read") from None
    if not isinstance(key_id, str) or not isinstance(mac, str) or len(key_id) > 64:
        raise BackupRefused(f"its signature ({SIGNATURE}) cannot be read")
    return key_id, mac
