"""A backup's archive: what it holds and leaves out, verify refusing anything but a whole,
unaltered backup Hearth made, restore writing all of it or nothing, and rotation."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from hearth.backup import rotation
from hearth.backup.making import make_backup
from hearth.backup.manifest import BackupRefused
from hearth.backup.reading import verify
from hearth.backup.restoring import restore
from hearth.home import Home
from tests.support.backups import (
    file_member,
    filled_home,
    members,
    plain_bytes,
    repack,
    write_tar,
)

KEPT_WORD = "kingfisher-5e1a"
SECRET_WORD = "ptarmigan-93bd"
FILES = {
    "config.toml": b"[gateway]\nport = 8765\n",
    "settings.json": b"{}",
    "token": b"secret-token-7f3a\n",
    "logs/gateway.log": b"a log line\n",
    "workspace/memory/notes.md": b"# Notes\nlikes tea\n",
    "workspace/project.txt": b"the workspace's own files\n",
    "agents/default/AGENTS.md": b"be brief\n",
    "prompts/greet.md": b"say hello\n",
    "sessions/kept/attachments/abc": b"kept attachment bytes",
    "sessions/gone/workspace/scratch.txt": f"temporary {SECRET_WORD}".encode(),
}


@pytest.fixture
def home(tmp_path: Path) -> Home:
    root = tmp_path / "home"
    filled_home(root, {"kept": ("persistent", [f"about the {KEPT_WORD}"]),
                       "gone": ("temporary", [f"about the {SECRET_WORD}"])}, FILES)
    return Home(root)


@pytest.fixture
def archive(home: Home, tmp_path: Path) -> Path:
    return make_backup(home, home.database_url(), tmp_path / "backups").path


def test_an_archive_holds_the_home_and_a_manifest_of_every_file(archive: Path) -> None:
    names = members(archive)
    assert names[0] == "db/hearth.db" and names[-1] == "manifest.json"
    assert set(names) == {"db/hearth.db", "manifest.json", "home/config.toml",
                          "home/settings.json", "home/workspace/memory/notes.md",
                          "home/agents/default/AGENTS.md", "home/prompts/greet.md",
                          "home/sessions/kept/attachments/abc"}
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for entry in manifest["files"]:
            data = tar.extractfile(entry["path"]).read()  # type: ignore[union-attr]
            assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"],
                                                                   entry["sha256"])
    assert manifest["database"] == {"engine": "sqlite", "revision": manifest["database"]
                                    ["revision"], "file": "db/hearth.db"}
    assert manifest["database"]["revision"] and manifest["chats"] == 1
    assert manifest["left_out"] == 1
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert rotation.archives(archive.parent) == [archive]


def test_the_token_logs_and_a_temporary_chat_are_in_no_byte_of_it(archive: Path) -> None:
    data = plain_bytes(archive)
    assert KEPT_WORD.encode() in data  # the kept chat is there, readable
    for absent in (SECRET_WORD.encode(), b"secret-token-7f3a", b"a log line",
                   b"the workspace's own files"):
        assert absent not in data


def test_verify_accepts_a_whole_backup(archive: Path) -> None:
    checked = verify(archive)
    assert checked.manifest.engine == "sqlite" and checked.manifest.chats == 1


def test_verify_refuses_a_flipped_byte(archive: Path, tmp_path: Path) -> None:
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    broken = tmp_path / "flipped.tar.gz"
    broken.write_bytes(bytes(data))
    with pytest.raises(BackupRefused, match="not a backup Hearth can use"):
        verify(broken)


def test_verify_refuses_a_member_changed_under_its_checksum(archive: Path,
                                                            tmp_path: Path) -> None:
    changed = tmp_path / "changed.tar.gz"
    repack(archive, changed, lambda name, data: data.replace(b"tea", b"tee")
           if name == "home/workspace/memory/notes.md" else data)
    with pytest.raises(BackupRefused, match="does not match its checksum"):
        verify(changed)
    short = tmp_path / "short.tar.gz"
    repack(archive, short, lambda name, data: None if name == "home/prompts/greet.md"
           else data)
    with pytest.raises(BackupRefused, match="is missing from it"):
        verify(short)


def test_verify_refuses_a_database_that_fails_its_integrity_check(
        archive: Path, tmp_path: Path) -> None:
    """The manifest re-made to match a damaged database still does not pass."""
    damaged = tmp_path / "damaged.tar.gz"

    def damage(name: str, data: bytes) -> bytes:
        if name == "db/hearth.db":
            return data[:4096] + bytes(len(data) - 4096)  # every page but the first zeroed
        if name == "manifest.json":
            body = json.loads(data)
            for entry in body["files"]:
                if entry["path"] == "db/hearth.db":
                    entry["sha256"] = hashlib.sha256(zeroed).hexdigest()
            return json.dumps(body).encode()
        return data

    with tarfile.open(archive) as tar:
        whole = tar.extractfile("db/hearth.db").read()  # type: ignore[union-attr]
    zeroed = whole[:4096] + bytes(len(whole) - 4096)
    repack(archive, damaged, damage)
    with pytest.raises(BackupRefused, match="database"):
        verify(damaged)


def test_verify_refuses_a_foreign_tar(tmp_path: Path) -> None:
    foreign = tmp_path / "photos.tar.gz"
    write_tar(foreign, [(file_member("home/a.txt"), b"just a file")])
    with pytest.raises(BackupRefused, match="no manifest"):
        verify(foreign)
    not_a_tar = tmp_path / "notes.tar.gz"
    not_a_tar.write_bytes(b"plain words, not an archive")
    with pytest.raises(BackupRefused, match="not a whole archive"):
        verify(not_a_tar)


def hostile(name: str, kind: bytes = tarfile.REGTYPE) -> tuple[tarfile.TarInfo, bytes | None]:
    info = file_member(name)
    info.type = kind
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/passwd"
        return info, None
    return info, b"payload"


@pytest.mark.parametrize("entry", [
    hostile("../escaped.txt"), hostile("home/../../escaped.txt"), hostile("/tmp/escaped.txt"),
    hostile("home/link", tarfile.SYMTYPE), hostile("home/linked", tarfile.LNKTYPE),
    hostile("elsewhere/file.txt"),
], ids=["parent", "climbing", "absolute", "symlink", "hardlink", "outside"])
def test_verify_and_restore_refuse_a_hostile_member_and_write_nothing(
        archive: Path, tmp_path: Path, entry: tuple[tarfile.TarInfo, bytes | None]) -> None:
    bad = tmp_path / "bad" / "bad.tar.gz"
    bad.parent.mkdir()
    with tarfile.open(archive) as tar:
        kept = [(member, tar.extractfile(member).read())  # type: ignore[union-attr]
                for member in tar.getmembers()]
    write_tar(bad, [kept[0], entry, *kept[1:]])
    with pytest.raises(BackupRefused, match="not a backup Hearth can use"):
        verify(bad)
    target = tmp_path / "place" / "restored"
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackupRefused):
        restore(bad, target, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # not even `place`
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()


def test_restore_makes_the_home_whole_without_the_token(archive: Path, home: Home,
                                                        tmp_path: Path) -> None:
    target = tmp_path / "restored"
    done = restore(archive, target, None)
    assert done.home == target and done.manifest.chats == 1
    for name in ("config.toml", "workspace/memory/notes.md", "agents/default/AGENTS.md",
                 "prompts/greet.md", "sessions/kept/attachments/abc"):
        assert (target / name).read_bytes() == FILES[name]
    assert not (target / "token").exists() and not (target / "logs").exists()
    assert not (target / "sessions" / "gone").exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert KEPT_WORD.encode() in (target / "hearth.db").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_restore_refuses_a_home_that_is_not_empty(archive: Path, tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "mine.txt").write_text("the owner's")
    with pytest.raises(BackupRefused, match="is not empty"):
        restore(archive, target, None)
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert restore(archive, empty, None).home == empty  # an empty folder is fine


def test_restore_of_a_corrupt_archive_writes_nothing(archive: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackupRefused, match="not a whole archive|no manifest"):
        restore(cut, tmp_path / "restored", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_postgresql_backup_needs_a_database_to_restore_into(archive: Path,
                                                               tmp_path: Path) -> None:
    as_pg = tmp_path / "pg.tar.gz"

    def relabel(name: str, data: bytes) -> bytes | None:
        if name == "db/hearth.db":
            return None
        if name == "manifest.json":
            body = json.loads(data)
            body["database"].update(engine="postgresql", file="db/hearth.sql")
            body["files"] = [e for e in body["files"] if e["path"] != "db/hearth.db"]
            body["files"].append({"path": "db/hearth.sql", "size": len(dump),
                                  "sha256": hashlib.sha256(dump).hexdigest()})
            return json.dumps(body).encode()
        return data

    dump = b"-- PostgreSQL database dump\n\n-- PostgreSQL database dump complete\n"
    repack(archive, as_pg, relabel)
    with tarfile.open(as_pg) as tar:  # the dump goes in just before the manifest
        entries = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    write_tar(as_pg, [*entries[:-1], (file_member("db/hearth.sql"), dump), entries[-1]])
    verify(as_pg)  # a whole PostgreSQL backup
    with pytest.raises(BackupRefused, match="HEARTH_DATABASE_URL"):
        restore(as_pg, tmp_path / "restored", None)
    assert not (tmp_path / "restored").exists()


def test_rotation_keeps_the_newest_of_its_own_names(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    names = ["hearth-backup-20260101-000000.tar.gz", "hearth-backup-20260102-000000.tar.gz",
             "hearth-backup-20260102-000000-2.tar.gz", "hearth-backup-20260103-120000.tar.gz",
             "hearth-backup-20251231-235959.tar.gz"]
    others = ["notes.txt", "hearth-backup-latest.tar.gz", "other-20200101-000000.tar.gz"]
    for name in names + others:
        (folder / name).write_bytes(b"x")
    gone = rotation.rotate(folder, 3)
    assert sorted(p.name for p in gone) == ["hearth-backup-20251231-235959.tar.gz",
                                            "hearth-backup-20260101-000000.tar.gz"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["hearth-backup-20260102-000000.tar.gz", "hearth-backup-20260102-000000-2.tar.gz",
         "hearth-backup-20260103-120000.tar.gz", *others])
    assert rotation.newest_made(folder) == rotation.made_at(
        folder / "hearth-backup-20260103-120000.tar.gz")


def test_a_killed_backups_leftovers_are_swept_by_the_next(home: Home, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    dead = 2 ** 22 + 1  # above the kernel's pid_max on a default system: never alive
    (folder / f".hearth-backup-{dead}-00aa.partial").write_bytes(b"half an archive")
    (folder / f".hearth-backup-{dead}-00bb.staging").mkdir()
    mine = folder / f".hearth-backup-{os.getpid()}-00cc.partial"  # a backup still running
    mine.write_bytes(b"in progress")
    made = make_backup(home, home.database_url(), folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([made.path.name, mine.name])
