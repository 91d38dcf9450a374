"""The home folder: where Hearth keeps its database, token, workspace, chats' own folders
and logs.

Owns the layout of `$HEARTH_HOME` (default `~/.hearth`) and the bearer token file in it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "HEARTH_TOKEN"


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def from_env(cls) -> Home:
        raw = os.environ.get("HEARTH_HOME") or "~/.hearth"
        return cls(Path(raw).expanduser().resolve())

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def db_file(self) -> Path:
        return self.root / "hearth.db"

    @property
    def token_file(self) -> Path:
        return self.root / "token"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def sessions_dir(self) -> Path:
        """Each chat's own working folder is `sessions/<key>/` (a Temporary chat's workspace
        is `sessions/<key>/workspace`); deleting the chat removes it."""
        return self.root / "sessions"

    @property
    def memory_dir(self) -> Path:
        return self.workspace / "memory"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def ensure(self) -> None:
        """Create the folders the gateway needs (idempotent)."""
        for path in (self.root, self.workspace, self.memory_dir, self.logs):
            path.mkdir(parents=True, exist_ok=True)

    def database_url(self) -> str:
        return os.environ.get("HEARTH_DATABASE_URL") or f"sqlite:///{self.db_file}"

    def token(self, create: bool = True) -> str | None:
        """The bearer token: HEARTH_TOKEN, else the token file (made 0600 on first use)."""
        from_env = os.environ.get(TOKEN_ENV, "").strip()
        if from_env:
            return from_env
        kept = self._read_token()
        if kept or not create:
            return kept
        self.root.mkdir(parents=True, exist_ok=True)
        # written whole under a temporary name, then linked into place: a reader never sees
        # a half-written token, and of two processes making one at once the first one wins
        token = secrets.token_urlsafe(32)
        tmp = self.root / f".token.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        try:
            if self.token_file.exists() and not self._read_token():
                os.replace(tmp, self.token_file)  # an empty file left by a crash: replace it
            else:
                os.link(tmp, self.token_file)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return self._read_token()

    def _read_token(self) -> str | None:
        try:
            return self.token_file.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None
