"""The home is the owner's alone: a real gateway started under a permissive umask keeps the
home 0700 and everything Hearth writes in it 0600 (folders 0700) — the database with its -wal
and -shm, the token, logs — and a start over a home an older Hearth left readable takes group
and other access away, without touching the owner's files in the workspace or config.toml."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hearth.home import Home
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway, write_config

OWNERS_FILES = ("config.toml",)  # written by the owner, not by Hearth


class TokenlessGateway(Gateway):
    """A gateway that makes its own token file (no HEARTH_TOKEN), logging beside the home."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.log = home.parent / "gateway.log"

    def env(self) -> dict[str, str]:
        env = super().env()
        env.pop("HEARTH_TOKEN")
        return env

    def token(self) -> str:
        return (self.home / "token").read_text().strip()


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The umask most desktops start with: files 0644, folders 0755 unless said otherwise."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def too_open(home: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every path under `home` (home included) that its group or others may use."""
    found = {}
    for path in (home, *home.rglob("*")):
        if path in skip or path.name in OWNERS_FILES or path.is_symlink():
            continue
        if mode(path) & 0o077:
            found[str(path.relative_to(home))] = oct(mode(path))
    return found


def chat_once(gateway: TokenlessGateway, server: ScriptedModelServer) -> None:
    server.push(Reply(text="Hello."))
    api = gateway.client(gateway.token())
    key = api.new_chat()
    assert api.wait(api.send(key, "hello")["run_id"])["status"] == "complete"


def test_a_fresh_home_is_private_under_a_permissive_umask(
        tmp_path: Path, loose_umask: None, model_server: ScriptedModelServer) -> None:
    """Before: under umask 022 the gateway left the home 0755 and hearth.db, -wal and -shm
    0644: any local user could read every transcript, Incognito chats' included."""
    home = tmp_path / "fresh"
    write_config(home, model_server.openai_base_url)  # the owner's first step: 0755, 0644
    gateway = TokenlessGateway(home).start()
    try:
        chat_once(gateway, model_server)
        assert mode(home) == 0o700
        for name in ("hearth.db", "hearth.db-wal", "hearth.db-shm", "token"):
            assert mode(home / name) == 0o600, name
        for name in ("logs", "workspace", "workspace/memory"):
            assert mode(home / name) == 0o700, name
        assert too_open(home) == {}
        assert mode(home / "config.toml") == 0o644  # the owner's file, as the owner made it
    finally:
        gateway.kill()


def test_a_start_makes_an_old_homes_files_private_and_leaves_the_workspace_alone(
        tmp_path: Path, loose_umask: None, model_server: ScriptedModelServer) -> None:
    """Before: a home an older Hearth left 0755 with a 0644 database, WAL, token, settings
    and logs stayed that way at every later start."""
    home = tmp_path / "old"
    write_config(home, model_server.openai_base_url)
    first = TokenlessGateway(home).start()
    chat_once(first, model_server)
    first.kill()  # the -wal and -shm stay behind, as after a crash
    (home / "settings.json").write_text("{}\n")
    (home / "sessions").mkdir(exist_ok=True)
    (home / "logs" / "old").mkdir(parents=True)
    (home / "logs" / "old" / "gateway.log").write_text("a line\n")
    mine = home / "workspace" / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the owner's notes\n")
    for path in (home, *home.rglob("*")):  # as an older Hearth under umask 022 left them
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert {"hearth.db-wal", "hearth.db-shm", "token"} <= set(too_open(home))

    again = TokenlessGateway(home).start()
    try:
        chat_once(again, model_server)
        assert mode(home) == 0o700
        for name in ("hearth.db", "hearth.db-wal", "hearth.db-shm", "token", "settings.json",
                     "logs/old/gateway.log"):
            assert mode(home / name) == 0o600, name
        assert mode(home / "logs") == mode(home / "logs" / "old") == 0o700
        assert mode(home / "sessions") == 0o700
        workspace = home / "workspace"
        left = (workspace, *workspace.rglob("*"))
        assert too_open(home, skip=left) == {}
        # the workspace is the owner's: nothing in it is changed (the 0700 home keeps it)
        assert mode(mine / "notes.txt") == 0o644 and mode(mine) == 0o755
        assert mode(workspace) == 0o755 and mode(home / "config.toml") == 0o644
        assert httpx.get(f"{again.url}/healthz").status_code == 200
    finally:
        again.kill()


def test_home_ensure_sets_the_umask_and_a_token_is_made_private(
        tmp_path: Path, loose_umask: None) -> None:
    """Before: Home.ensure made the folders under the caller's umask (0755 here)."""
    home = Home(tmp_path / "cli-home")
    home.ensure()
    assert os.umask(0o077) == 0o077  # what ensure left set
    assert mode(home.root) == mode(home.logs) == mode(home.workspace) == 0o700
    assert home.token() and mode(home.token_file) == 0o600
