"""`hearth db check`, run as a user runs it, on SQLite and on PostgreSQL: it says that the
database answers, where its schema stands and whether the settings an acknowledged message's
safety rests on hold, changes nothing, and exits 1 on a problem."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support import postgres
from tests.support.cli import hearth


def test_a_home_with_no_database_yet_says_so_and_makes_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = hearth("db", "check", home=home)
    assert done.returncode == 1
    assert "There is no database at" in done.stdout and "hearth db upgrade" in done.stdout
    assert not (home / "hearth.db").exists()  # a check changes nothing


def test_a_current_sqlite_store_passes_and_a_behind_one_says_to_upgrade(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hearth("db", "upgrade", home=home).returncode == 0
    done = hearth("db", "check", home=home)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok") and "SQLite" in lines[0]
    assert any("The schema is current" in line for line in lines)
    assert any("journal_mode is wal" in line for line in lines)
    with sqlite3.connect(home / "hearth.db") as conn:  # as an older Hearth left it
        conn.execute("UPDATE alembic_version SET version_num = '0012'")
    behind = hearth("db", "check", home=home)
    assert behind.returncode == 1
    assert "The schema is behind (migration 0012" in behind.stdout
    assert "hearth db upgrade" in behind.stdout
    with sqlite3.connect(home / "hearth.db") as conn:  # as a newer Hearth left it
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    ahead = hearth("db", "check", home=home)
    assert ahead.returncode == 1 and "a newer Hearth made it" in ahead.stdout


def test_on_postgresql_a_server_without_fsync_is_a_problem(tmp_path: Path) -> None:
    """The tests' own cluster runs with fsync off (for speed): exactly what the check must
    call a problem, with the password never printed."""
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    store = postgres.database()
    url = store.engine.url.set(password="s3cret-pw").render_as_string(hide_password=False)
    store.close()
    done = hearth("db", "check", home=tmp_path / "home",
                  extra_env={"HEARTH_DATABASE_URL": url})
    assert done.returncode == 1, done.stdout
    assert "PostgreSQL" in done.stdout and "The schema is current" in done.stdout
    assert "PROBLEM  fsync: fsync is off" in done.stdout
    assert "ok       privacy roles: The roles Incognito and Temporary" in done.stdout
    assert "synchronous_commit is off" in done.stdout
    assert "s3cret-pw" not in done.stdout + done.stderr


def test_a_database_that_does_not_answer_says_why(tmp_path: Path) -> None:
    url = "postgresql+psycopg://hearth:pw@127.0.0.1:9/nowhere"
    if postgres.unavailable() is not None and "psycopg" in (postgres.unavailable() or ""):
        pytest.skip("psycopg is not installed")
    done = hearth("db", "check", home=tmp_path / "home", extra_env={"HEARTH_DATABASE_URL": url})
    assert done.returncode == 1
    assert "does not answer" in done.stdout and "pw@" not in done.stdout


def _filled_home(tmp_path: Path) -> Path:
    """A home whose store holds a kept chat (messages, a run), an Incognito chat and a memory
    item, written through the store as the gateway writes them."""
    from hearth.store import memory, sessions, transcript
    from hearth.store.db import Database
    from tests.support.store import seed

    home = tmp_path / "home"
    seed(home / "hearth.db")
    store = Database(f"sqlite:///{home / 'hearth.db'}")
    try:
        with store.write() as conn:
            sessions.insert(conn, key="kept", tab_id="t1", memory_mode="persistent",
                            chat_number=1, title="Garden")
            sessions.insert(conn, key="secret", tab_id="t2", memory_mode="incognito",
                            chat_number=None, title=None)
            for n in range(1200):  # more than a batch
                transcript.append(conn, "kept", "user", {"text": f"the heron number {n}"})
            transcript.append(conn, "secret", "user", {"text": "never-copied-words"})
            memory.remember(conn, kind="fact", words="The shed key is blue",
                            written_by="test", filed_under=None)
    finally:
        store.close()
    return home


def test_a_copy_to_postgresql_takes_every_kept_row_and_no_restricted_chat(
        tmp_path: Path) -> None:
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    home = _filled_home(tmp_path)
    cluster = postgres.cluster()
    url = cluster.create(f"copy_{tmp_path.name[-20:].replace('-', '_')}", template=None)
    done = hearth("db", "copy", "--to", url, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok       transcript_events: 1200 copied, 1200 there" in done.stdout
    assert "ok       sessions: 1 copied, 1 there" in done.stdout
    assert "Copied and verified" in done.stdout
    from hearth.store import search
    from hearth.store.db import Database

    target = Database(url)
    try:
        with target.read() as conn:
            hits = search.search(conn, "heron", search.Filters(), limit=5).hits
            words = conn.exec_driver_sql(
                "SELECT count(*) FROM transcript_events WHERE CAST(content AS TEXT) "
                "LIKE '%%never-copied%%'").scalar()
        assert hits and hits[0].session_key == "kept"  # its search index filled as it came
        assert words == 0  # the Incognito chat stayed behind
        with target.write() as conn:  # the id sequences stand past the ids copied
            memory_id = conn.exec_driver_sql(
                "INSERT INTO memory_items (kind, text, fingerprint, written_by, created_at, "
                "updated_at) VALUES ('fact', 'new', 'f2', 't', 1, 1) RETURNING id").scalar()
        assert memory_id == 2
    finally:
        target.close()
    again = hearth("db", "copy", "--to", url, home=home)
    assert again.returncode == 2 and "already holds rows" in again.stderr
