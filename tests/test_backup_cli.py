"""`hearth backup`, `hearth backup --verify` and `hearth restore` as a user runs them: what
they print, their exit codes, another home's archive needing that home's key (`--key`), and a
backup killed midway (`HEARTH_CRASH_AT=backup_archiving`,
an `os._exit` as sudden as kill -9) leaving nothing a verify accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hearth.backup import rotation
from hearth.faults import EXIT_CODE
from tests.support.backups import accepted, filled_home, key_of
from tests.support.cli import hearth

CHATS = {"kept": ("persistent", ["the wren nests"])}
FILES = {"workspace/memory/notes.md": b"# Notes\n" + b"a line of notes\n" * 2000,
         "prompts/greet.md": b"say hello\n"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    filled_home(root, CHATS, FILES)
    return root


def test_backup_verify_and_restore_say_what_they_did(home: Path, tmp_path: Path) -> None:
    made = hearth("backup", home=home)  # into the home's backups/ by default
    assert made.returncode == 0, made.stderr
    archive = rotation.archives(home / "backups")[0]
    assert f"Backed up to {archive}" in made.stdout and "1 chat(s)" in made.stdout
    assert f"({home / 'backup.key'}): a restore on another machine needs that file" in made.stdout
    checked = hearth("backup", "--verify", str(archive), home=home)
    assert checked.returncode == 0, checked.stderr
    assert "a whole backup" in checked.stdout and "every checksum matches" in checked.stdout
    assert "signature is the backup key's" in checked.stdout
    target = tmp_path / "restored"
    done = hearth("restore", str(archive), "--home", str(target), home=home)
    assert done.returncode == 0, done.stderr
    assert f"Restored into {target}" in done.stdout and "hearth token" in done.stdout
    assert (target / "prompts" / "greet.md").read_bytes() == FILES["prompts/greet.md"]
    again = hearth("restore", str(archive), "--home", str(target), home=home)
    assert again.returncode == 1 and "is not empty" in again.stderr and not again.stdout


def test_another_homes_archive_needs_its_key(home: Path, tmp_path: Path) -> None:
    assert hearth("backup", "--to", str(tmp_path / "b"), home=home).returncode == 0
    archive = rotation.archives(tmp_path / "b")[0]
    elsewhere = tmp_path / "elsewhere"  # another machine's home: no key of that home
    for command in (["backup", "--verify", str(archive)],
                    ["restore", str(archive), "--home", str(tmp_path / "restored")]):
        refused = hearth(*command, home=elsewhere)
        assert refused.returncode == 1 and not refused.stdout
        assert "is signed with backup key" in refused.stderr
        assert "give the backup.key of the home that made it with --key FILE" in refused.stderr
    assert not (tmp_path / "restored").exists()
    key = ["--key", str(home / "backup.key")]
    assert hearth("backup", "--verify", str(archive), *key, home=elsewhere).returncode == 0
    done = hearth("restore", str(archive), "--home", str(tmp_path / "restored"), *key,
                  home=elsewhere)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "restored" / "backup.key").read_bytes() == (home / "backup.key").read_bytes()


def test_verify_of_a_damaged_archive_exits_1_with_a_sentence(home: Path, tmp_path: Path) -> None:
    assert hearth("backup", "--to", str(tmp_path / "b"), home=home).returncode == 0
    archive = rotation.archives(tmp_path / "b")[0]
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    checked = hearth("backup", "--verify", str(archive), home=home)
    assert checked.returncode == 1 and not checked.stdout
    assert checked.stderr.startswith(f"{archive.name} is not a backup Hearth can use")
    assert "Traceback" not in checked.stderr


def test_a_backup_with_no_database_says_so(tmp_path: Path) -> None:
    made = hearth("backup", "--to", str(tmp_path / "b"), home=tmp_path / "empty-home")
    assert made.returncode == 1
    assert "No backup was made: There is no database" in made.stderr
    assert rotation.archives(tmp_path / "b") == []


@pytest.mark.slow
def test_a_backup_killed_midway_leaves_nothing_verify_accepts(home: Path,
                                                              tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    killed = hearth("backup", "--to", str(folder), home=home,
                    extra_env={"HEARTH_CRASH_AT": "backup_archiving"})
    assert killed.returncode == EXIT_CODE, killed.stderr
    left = sorted(folder.iterdir())
    partial = [path for path in left if path.name.endswith(".partial")]
    assert partial and partial[0].stat().st_size > 0  # it died with an archive half written
    assert rotation.archives(folder) == []  # no file under a backup's name
    assert accepted(folder, key_of(home)) == []  # and nothing there a verify accepts
    said = hearth("backup", "--verify", str(partial[0]), home=home)
    assert said.returncode == 1 and "is not a backup Hearth can use" in said.stderr
    then = hearth("backup", "--to", str(folder), home=home)
    assert then.returncode == 0, then.stderr
    assert sorted(folder.iterdir()) == rotation.archives(folder) == accepted(folder, key_of(home))
