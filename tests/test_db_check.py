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
    assert "synchronous_commit is off" in done.stdout
    assert "s3cret-pw" not in done.stdout + done.stderr


def test_a_database_that_does_not_answer_says_why(tmp_path: Path) -> None:
    url = "postgresql+psycopg://hearth:pw@127.0.0.1:9/nowhere"
    if postgres.unavailable() is not None and "psycopg" in (postgres.unavailable() or ""):
        pytest.skip("psycopg is not installed")
    done = hearth("db", "check", home=tmp_path / "home", extra_env={"HEARTH_DATABASE_URL": url})
    assert done.returncode == 1
    assert "does not answer" in done.stdout and "pw@" not in done.stdout
