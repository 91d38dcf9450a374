"""A backup's archive: what it holds and leaves out, verify refusing anything but a whole,
unaltered backup Hearth made (signed with the home's backup key, its database's schema the
migrations'), restore writing all of it or nothing, and rotation."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import tarfile
from contextlib import closing
from pathlib import Path

import pytest

from hearth.backup import rotation
from hearth.backup.keys import KeyFile
from hearth.backup.making import make_backup
from hearth.backup.manifest import BackupRefused
from hearth.backup.reading import verify
from hearth.backup.restoring import restore
from hearth.home import Home
from tests.support.backups import (
    file_member,
    filled_home,
    key_of,
    members,
    plain_bytes,
    repack,
    resigned,
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


@pytest.fixture
def key(home: Home, archive: Path) -> KeyFile:
    """The home's backup key, which its first backup (`archive`) made."""
    return key_of(home.root)


def test_an_archive_holds_the_home_and_a_manifest_of_every_file(archive: Path) -> None:
    names = members(archive)
    assert names[0] == "db/hearth.db" and names[-2:] == ["manifest.json", "manifest.hmac"]
    assert set(names) == {"db/hearth.db", "manifest.json", "manifest.hmac", "home/config.toml",
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


def test_verify_accepts_a_whole_backup(archive: Path, key: KeyFile) -> None:
    checked = verify(archive, key)
    assert checked.manifest.engine == "sqlite" and checked.manifest.chats == 1


def test_verify_refuses_a_flipped_byte(archive: Path, key: KeyFile, tmp_path: Path) -> None:
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    broken = tmp_path / "flipped.tar.gz"
    broken.write_bytes(bytes(data))
    with pytest.raises(BackupRefused, match="not a backup Hearth can use"):
        verify(broken, key)


def test_verify_refuses_a_member_changed_under_its_checksum(archive: Path, key: KeyFile,
                                                            tmp_path: Path) -> None:
    changed = tmp_path / "changed.tar.gz"
    repack(archive, changed, lambda name, data: data.replace(b"tea", b"tee")
           if name == "home/workspace/memory/notes.md" else data)
    with pytest.raises(BackupRefused, match="does not match its checksum"):
        verify(changed, key)
    short = tmp_path / "short.tar.gz"
    repack(archive, short, lambda name, data: None if name == "home/prompts/greet.md"
           else data)
    with pytest.raises(BackupRefused, match="is missing from it"):
        verify(short, key)


def test_verify_refuses_a_database_that_fails_its_integrity_check(
        archive: Path, key: KeyFile, tmp_path: Path) -> None:
    """The manifest re-made (and signed) to match a damaged database still does not pass."""
    damaged = tmp_path / "damaged.tar.gz"
    resigned(archive, damaged, lambda name, data: data[:4096] + bytes(len(data) - 4096)
             if name == "db/hearth.db" else data, key)  # every page but the first zeroed
    with pytest.raises(BackupRefused, match="database"):
        verify(damaged, key)


def test_verify_refuses_a_foreign_tar(key: KeyFile, tmp_path: Path) -> None:
    foreign = tmp_path / "photos.tar.gz"
    write_tar(foreign, [(file_member("home/a.txt"), b"just a file")])
    with pytest.raises(BackupRefused, match="no manifest"):
        verify(foreign, key)
    not_a_tar = tmp_path / "notes.tar.gz"
    not_a_tar.write_bytes(b"plain words, not an archive")
    with pytest.raises(BackupRefused, match="not a whole archive"):
        verify(not_a_tar, key)


PLANTED = {  # what someone with the archive's key (or the database's file) might put in it
    "trigger": ("CREATE TRIGGER planted AFTER INSERT ON transcript_events "
                "BEGIN DELETE FROM grants; END", "holds a trigger 'planted'"),
    "view": ("CREATE VIEW planted AS SELECT key FROM sessions", "holds a view 'planted'"),
    "table": ("CREATE TABLE planted (x TEXT)", "holds a table 'planted'"),
    "missing": ("DROP INDEX ix_attachments_chat", "lacks the index 'ix_attachments_chat'"),
    "changed": ("DROP TRIGGER memory_items_ad; CREATE TRIGGER memory_items_ad AFTER DELETE ON "
                "memory_items BEGIN SELECT 1; END", "trigger 'memory_items_ad' is not the one"),
}


def planted(data: bytes, sql: str, scratch: Path) -> bytes:
    """A database file's bytes with `sql` run in it."""
    path = scratch / "planted.db"
    path.write_bytes(data)
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(sql)
    changed = path.read_bytes()
    path.unlink()
    return changed


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_verify_and_restore_refuse_a_schema_the_migrations_do_not_make(
        archive: Path, key: KeyFile, tmp_path: Path, plant: str) -> None:
    """Signed again with the key (so only the schema can say so): a trigger, view or table
    more, an index less or a trigger changed is refused, and the restore writes nothing."""
    sql, said = PLANTED[plant]
    bad = tmp_path / "planted.tar.gz"
    resigned(archive, bad, lambda name, data: planted(data, sql, tmp_path)
             if name == "db/hearth.db" else data, key)
    with pytest.raises(BackupRefused, match=f"not a backup Hearth can use: .*{said}"):
        verify(bad, key)
    with pytest.raises(BackupRefused, match=said):
        restore(bad, tmp_path / "restored", None, key)
    assert not (tmp_path / "restored").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_manifest_changed_by_one_byte_is_refused(archive: Path, key: KeyFile,
                                                   tmp_path: Path) -> None:
    def one_byte(data: bytes) -> bytes:
        at = data.index(b'"chats": 1') + len(b'"chats": ')
        return data[:at] + b"2" + data[at + 1:]

    changed = tmp_path / "changed.tar.gz"
    repack(archive, changed, lambda name, data: one_byte(data) if name == "manifest.json"
           else data)
    with pytest.raises(BackupRefused, match="manifest does not match its signature"):
        verify(changed, key)
    with pytest.raises(BackupRefused, match="manifest does not match its signature"):
        restore(changed, tmp_path / "restored", None, key)
    unsigned = tmp_path / "unsigned.tar.gz"
    repack(archive, unsigned, lambda name, data: None if name == "manifest.hmac" else data)
    with pytest.raises(BackupRefused, match="it is not signed"):
        verify(unsigned, key)
    assert not (tmp_path / "restored").exists()


def test_an_archive_from_another_home_needs_that_homes_key(archive: Path, key: KeyFile,
                                                          tmp_path: Path) -> None:
    other_home = tmp_path / "other"
    filled_home(other_home, {"theirs": ("persistent", ["another home's chat"])})
    other = make_backup(Home(other_home), Home(other_home).database_url(),
                        tmp_path / "theirs").path
    theirs = key_of(other_home)
    assert theirs.key is not None and key.key is not None and theirs.key.id != key.key.id
    with pytest.raises(BackupRefused, match=f"signed with backup key {theirs.key.id}, not "
                                            f"with the key at {key.path} .*--key FILE"):
        verify(other, key)
    nowhere = KeyFile(tmp_path / "nowhere" / "backup.key", None)
    with pytest.raises(BackupRefused, match=f"signed with backup key {theirs.key.id}, and "
                                            "there is no backup key at .*nowhere"):
        restore(other, tmp_path / "restored", None, nowhere)
    assert not (tmp_path / "restored").exists()
    assert verify(other, theirs).manifest.chats == 1  # with its own home's key it is whole
    assert restore(other, tmp_path / "restored", None, theirs).manifest.chats == 1


def test_the_first_backup_makes_the_key_and_no_archive_holds_it(
        archive: Path, key: KeyFile, home: Home, tmp_path: Path) -> None:
    assert key.path == home.root / "backup.key" and key.key is not None
    assert stat.S_IMODE(key.path.stat().st_mode) == 0o600
    secret = key.key.secret.hex().encode()
    assert secret not in plain_bytes(archive) and "home/backup.key" not in members(archive)
    again = make_backup(home, home.database_url(), tmp_path / "backups")
    assert again.key == key.key.id == json.loads(_member(again.path, "manifest.hmac"))["key"]


def _member(archive: Path, name: str) -> bytes:
    with tarfile.open(archive) as tar:
        source = tar.extractfile(name)
        assert source is not None
        return source.read()


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
        archive: Path, key: KeyFile, tmp_path: Path,
        entry: tuple[tarfile.TarInfo, bytes | None]) -> None:
    bad = tmp_path / "bad" / "bad.tar.gz"
    bad.parent.mkdir()
    with tarfile.open(archive) as tar:
        kept = [(member, tar.extractfile(member).read())  # type: ignore[union-attr]
                for member in tar.getmembers()]
    write_tar(bad, [kept[0], entry, *kept[1:]])
    with pytest.raises(BackupRefused, match="not a backup Hearth can use"):
        verify(bad, key)
    target = tmp_path / "place" / "restored"
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackupRefused):
        restore(bad, target, None, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # not even `place`
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()


def test_restore_makes_the_home_whole_without_the_token(archive: Path, key: KeyFile,
                                                        tmp_path: Path) -> None:
    target = tmp_path / "restored"
    done = restore(archive, target, None, key)
    assert done.home == target and done.manifest.chats == 1
    for name in ("config.toml", "workspace/memory/notes.md", "agents/default/AGENTS.md",
                 "prompts/greet.md", "sessions/kept/attachments/abc"):
        assert (target / name).read_bytes() == FILES[name]
    assert not (target / "token").exists() and not (target / "logs").exists()
    assert not (target / "sessions" / "gone").exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert KEPT_WORD.encode() in (target / "hearth.db").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert key_of(target) == KeyFile(target / "backup.key", key.key)  # it signs as before
    assert stat.S_IMODE((target / "backup.key").stat().st_mode) == 0o600


def test_restore_refuses_a_home_that_is_not_empty(archive: Path, key: KeyFile,
                                                   tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "mine.txt").write_text("the owner's")
    with pytest.raises(BackupRefused, match="is not empty"):
        restore(archive, target, None, key)
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert restore(archive, empty, None, key).home == empty  # an empty folder is fine


def test_restore_of_a_corrupt_archive_writes_nothing(archive: Path, key: KeyFile,
                                                      tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(BackupRefused, match="not a whole archive|no manifest"):
        restore(cut, tmp_path / "restored", None, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def as_postgresql(archive: Path, out: Path, key: KeyFile, dump: bytes) -> None:
    """`archive` as if its database were PostgreSQL's `dump` (signed with `key`)."""
    resigned(archive, out, lambda name, data: None if name == "db/hearth.db" else data, key,
             added={"db/hearth.sql": dump},
             relabel=lambda body: body["database"].update(engine="postgresql",
                                                          file="db/hearth.sql"))


def test_a_postgresql_backup_needs_a_database_to_restore_into(archive: Path, key: KeyFile,
                                                               tmp_path: Path) -> None:
    as_pg = tmp_path / "pg.tar.gz"
    dump = b"-- PostgreSQL database dump\n\n-- PostgreSQL database dump complete\n"
    as_postgresql(archive, as_pg, key, dump)
    verify(as_pg, key)  # a whole PostgreSQL backup
    with pytest.raises(BackupRefused, match="HEARTH_DATABASE_URL"):
        restore(as_pg, tmp_path / "restored", None, key)
    assert not (tmp_path / "restored").exists()


@pytest.mark.parametrize("statement", [
    "CREATE FUNCTION public.planted() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; "
    "END$$;",
    "SELECT pg_catalog.setval('public.runs_id_seq', 1, true); DROP TABLE public.grants;",
    "SET role = postgres;",
], ids=["function", "after_a_setval", "role"])
def test_a_postgresql_dump_holding_more_than_data_is_refused(
        archive: Path, key: KeyFile, tmp_path: Path, statement: str) -> None:
    """Signed again with the key: a dump is data alone, never a statement the restore would
    run on the schema."""
    dump = (b"-- PostgreSQL database dump\n\nSET statement_timeout = 0;\n"
            + statement.encode() + b"\n\n-- PostgreSQL database dump complete\n")
    as_pg = tmp_path / "pg.tar.gz"
    as_postgresql(archive, as_pg, key, dump)
    with pytest.raises(BackupRefused, match="holds .* which a dump of data alone does not"):
        verify(as_pg, key)


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
