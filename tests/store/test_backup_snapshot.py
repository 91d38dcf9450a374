"""A backup's database: SQLite's online snapshot keeps the kept chats and no byte of a chat
that keeps nothing or was deleted (not in a row, a freed page, nor the search index);
PostgreSQL's dump is filtered the same way on its way to the file, and restores into an
empty database, refusing one that is not."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select, text

from hearth.store import search
from hearth.store.backup import SnapshotFailed, check_sqlite, snapshot_sqlite
from hearth.store.db import Database
from hearth.store.pg_dump import check_dump, dump_postgresql, kept_lines, restore_postgresql
from hearth.store.schema import sessions, transcript_events
from tests.support import postgres
from tests.support.backups import add_chats
from tests.support.store import migrated_store


def words() -> dict[str, str]:
    return {name: f"{name}-{uuid.uuid4().hex[:10]}" for name in
            ("kept", "incognito", "temporary", "deleted")}


def chats_saying(said: dict[str, str]) -> dict[str, tuple[str, list[str]]]:
    return {"kept": ("persistent", [f"the {said['kept']} sings"]),
            "quiet": ("incognito", [f"the {said['incognito']} hides"]),
            "brief": ("temporary", [f"the {said['temporary']} fades"]),
            "odd": ("future-mode", ["nothing kept of it"]),
            "doomed": ("persistent", [f"the {said['deleted']} goes"])}


def delete_chat(db: Database, key: str) -> None:
    with db.write() as conn:
        conn.execute(delete(transcript_events).where(transcript_events.c.session_key == key))
        conn.execute(delete(sessions).where(sessions.c.key == key))


def test_a_sqlite_snapshot_keeps_the_kept_chats_and_no_restricted_or_deleted_word(
        tmp_path: Path) -> None:
    said = words()
    with migrated_store(tmp_path) as db:
        add_chats(db, chats_saying(said))
        with db.read() as conn:  # the kept chats are in the search index
            assert search.search(conn, said["deleted"], search.Filters(), limit=20).hits
        delete_chat(db, "doomed")
        live = tmp_path / "t.db"
        snapshot = snapshot_sqlite(live, tmp_path / "snapshot.db")
    data = snapshot.path.read_bytes()
    assert said["kept"].encode() in data
    for gone in ("incognito", "temporary", "deleted"):
        assert said[gone].encode() not in data, gone
    assert snapshot.kept_chats == ("kept",) and snapshot.left_out == 3
    assert snapshot.revision and check_sqlite(snapshot.path) == (None, snapshot.revision)
    assert not Path(f"{snapshot.path}-wal").exists()  # one file, no write-ahead log beside it


def test_freed_pages_of_the_live_database_do_not_reach_the_snapshot(tmp_path: Path) -> None:
    """Even where the live file still holds a deleted chat's words in its free pages (a
    deletion made without secure_delete), the snapshot (vacuumed) holds none of them."""
    said = words()
    with migrated_store(tmp_path) as db:
        add_chats(db, {"doomed": ("persistent", [f"{said['deleted']} " * 400])})
    live = tmp_path / "t.db"
    with closing(sqlite3.connect(live, isolation_level=None)) as conn:
        conn.execute("PRAGMA secure_delete=OFF")
        conn.execute("DELETE FROM transcript_events")
        conn.execute("DELETE FROM sessions")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert said["deleted"].encode() in live.read_bytes()  # the planted leftover is there
    snapshot = snapshot_sqlite(live, tmp_path / "snapshot.db")
    assert said["deleted"].encode() not in snapshot.path.read_bytes()


def test_no_database_is_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(SnapshotFailed, match="There is no database"):
        snapshot_sqlite(tmp_path / "missing.db", tmp_path / "snapshot.db")


def test_the_dump_filter_drops_the_rows_of_chats_that_keep_nothing() -> None:
    dump = [
        "SET client_encoding = 'UTF8';\n",
        "COPY public.sessions (key, tab_id, memory_mode) FROM stdin;\n",
        "kept\tt1\tpersistent\n",
        "brief\tt2\ttemporary\n",
        "odd\\tname\tt3\tincognito\n",
        "\\.\n",
        "COPY public.transcript_events (seq, session_key, content) FROM stdin;\n",
        '1\tkept\t{"text": "kept words"}\n',
        '1\tbrief\t{"text": "secret words"}\n',
        '1\todd\\tname\t{"text": "hidden words"}\n',
        "\\.\n",
        "COPY public.audit (id, session_key, action) FROM stdin;\n",
        "1\t\\N\tsettings.saved\n",
        "2\tbrief\tchat.made\n",
        "\\.\n",
        "COPY public.memory_items (id, text) FROM stdin;\n",
        "1\tbrief\n",  # no chat column: every row stays, whatever it says
        "\\.\n",
    ]
    kept = "".join(kept_lines(dump, {"brief", "odd\tname"}))
    assert "kept words" in kept and "kept\tt1" in kept and "settings.saved" in kept
    for gone in ("secret words", "hidden words", "t2", "t3", "chat.made"):
        assert gone not in kept
    assert "1\tbrief\n" in kept  # memory_items' row, which names no chat
    assert kept.count("\\.\n") == 4


def postgres_or_skip() -> None:
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)


@pytest.mark.postgres
def test_a_postgresql_dump_restores_the_kept_chats_into_an_empty_database(
        tmp_path: Path) -> None:
    postgres_or_skip()
    said = words()
    source = postgres.database()
    target_url = postgres.cluster().create(f"restored_{uuid.uuid4().hex[:8]}", template=None)
    try:
        add_chats(source, chats_saying(said))
        delete_chat(source, "doomed")
        snapshot = dump_postgresql(source.url, tmp_path / "hearth.sql")
        data = snapshot.path.read_bytes()
        assert said["kept"].encode() in data
        for gone in ("incognito", "temporary", "deleted"):
            assert said[gone].encode() not in data, gone
        assert check_dump(snapshot.path) is None and snapshot.left_out == 3
        restore_postgresql(target_url, snapshot.path, snapshot.revision)
        restored = Database(target_url)
        try:
            with restored.read() as conn:
                assert list(conn.execute(select(sessions.c.key)).scalars()) == ["kept"]
                assert conn.execute(select(func.count()).select_from(transcript_events)
                                    ).scalar_one() == 1
                found = search.search(conn, said["kept"], search.Filters(), limit=20)
                assert [hit.session_key for hit in found.hits] == ["kept"]  # index rebuilt
                assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
        finally:
            restored.close()
        with pytest.raises(SnapshotFailed, match="not empty"):
            restore_postgresql(target_url, snapshot.path, snapshot.revision)
        planted = tmp_path / "planted.sql"  # pg_dump's own lines pass; one statement more not
        planted.write_bytes(data.replace(b"\n-- PostgreSQL database dump complete", (
            b"\nCREATE TRIGGER planted AFTER INSERT ON public.grants FOR EACH ROW EXECUTE "
            b"FUNCTION public.f();\n-- PostgreSQL database dump complete"), 1))
        assert "CREATE TRIGGER planted" in str(check_dump(planted))
    finally:
        source.close()
