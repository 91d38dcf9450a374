"""The home folder: where Hearth keeps its database, token, workspace, chats' own folders
and logs.

Owns the layout of `$HEARTH_HOME` (default `~/.hearth`), the bearer token file in it, and
who may read it: the owner alone. Whatever Hearth makes there is made under the umask 0o077
(folders 0700, files 0600), and at start `ensure` takes group and other access away from what
an older Hearth (or a looser umask) left: the home itself, the database with its `-wal`,
`-shm` and `-journal`, the token, settings.json, `sessions/` and all of `logs/`. Files the
owner keeps there — config.toml, what is inside the workspace — are left as they are: the
home's 0700 already keeps everyone else out of them.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from hearth.atomic import write_atomically

log = logging.getLogger(__name__)

TOKEN_ENV = "HEARTH_TOKEN"
PRIVATE_UMASK = 0o077
OWN_FILES = ("hearth.db", "hearth.db-wal", "hearth.db-shm", "hearth.db-journal", "token",
             "settings.json")  # Hearth's own files at the top of the home


_owner_umask: list[int] = []  # the umask this process started with, before `private_umask`


def private_umask() -> None:
    """From now on this process makes files 0600 and folders 0700 (its children inherit it)."""
    before = os.umask(PRIVATE_UMASK)
    if not _owner_umask:
        _owner_umask.append(before)


def owner_umask() -> int:
    """The umask the owner started Hearth with: what the agent's commands make in the owner's
    own folders is made with it (not with the home's private one)."""
    if _owner_umask:
        return _owner_umask[0]
    current = os.umask(PRIVATE_UMASK)
    os.umask(current)
    return current


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
    def agents_dir(self) -> Path:
        """Each agent's workspace files (AGENTS.md, SOUL.md, …) are in `agents/<name>/`
        (the default agent's in `agents/default/`): the owner's to edit, out of the tools'
        reach (the home is hidden from them)."""
        return self.root / "agents"

    @property
    def memory_dir(self) -> Path:
        return self.workspace / "memory"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def ensure(self) -> None:
        """Create the folders the gateway needs, readable by the owner alone, and make what
        an earlier start left there private (idempotent)."""
        private_umask()
        for path in (self.root, self.workspace, self.memory_dir, self.logs):
            path.mkdir(parents=True, exist_ok=True)
        self.make_private()

    def make_private(self) -> None:
        """Take group and other access away from the home and Hearth's own files in it."""
        _restrict(self.root)
        for name in OWN_FILES:
            _restrict(self.root / name)
        _restrict(self.sessions_dir)
        _restrict(self.logs)
        if self.logs.is_dir() and not self.logs.is_symlink():
            for folder, dirs, files in os.walk(self.logs):
                for name in (*dirs, *files):
                    _restrict(Path(folder) / name)

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
        private_umask()
        self.root.mkdir(parents=True, exist_ok=True)
        # written whole, then linked into place: a reader never sees a half-written token,
        # and of two processes making one at once the first one wins
        data = (secrets.token_urlsafe(32) + "\n").encode("utf-8")
        empty = self.token_file.exists() and not self._read_token()  # a crash's leftover
        write_atomically(self.token_file, data, mode=0o600, first_wins=not empty)
        return self._read_token()

    def _read_token(self) -> str | None:
        try:
            return self.token_file.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None


def _restrict(path: Path) -> None:
    """Clear the group and other bits of `path` (never through a link); a path that is not
    there is fine, one that cannot be changed is said in the log."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(found.st_mode)
    if stat.S_ISLNK(found.st_mode) or not mode & 0o077:
        return
    try:
        os.chmod(path, mode & ~0o077)
    except OSError as error:
        log.warning("%s is readable by others and could not be made private (%s)", path,
                    error.strerror)
