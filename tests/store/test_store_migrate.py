"""A start on a current schema asks the migration files and the version row, not Alembic;
anything else is Alembic's to decide."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory

from hearth.store import migrate
from hearth.store.db import MIGRATIONS, Database

PROBE = """
import sys
from hearth.store.db import Database
db = Database(sys.argv[1])
db.upgrade()
db.close()
print("alembic" in sys.modules)
"""


def _alembic_head() -> str | None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def test_the_head_read_from_the_files_is_alembics_head() -> None:
    assert migrate.head_revision() == _alembic_head() is not None


def test_files_that_name_two_heads_or_cannot_be_read_leave_it_to_alembic(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('revision = "a"\ndown_revision = None\n')
    (tmp_path / "b.py").write_text('revision = "b"\ndown_revision = "a"\n')
    assert migrate.head_revision(tmp_path) == "b"
    (tmp_path / "c.py").write_text('revision = "c"\ndown_revision = "a"\n')  # a branch
    assert migrate.head_revision(tmp_path) is None
    (tmp_path / "c.py").write_text('revision = ("c")\n')
    assert migrate.head_revision(tmp_path) is None


def _downgrade(db: Database, revision: str) -> None:
    """Take the database back to `revision`, by the migrations' own downgrades."""
    from alembic import command

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def _alembic_imported(url: str) -> bool:
    done = subprocess.run([sys.executable, "-c", PROBE, url], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip() == "True"


def test_a_current_schema_starts_without_importing_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert _alembic_imported(url)  # a new database: Alembic makes the schema
    assert not _alembic_imported(url)  # now current: seen so without it
    db = Database(url)
    _downgrade(db, "0007")  # an older schema version: Alembic brings it up again
    db.close()
    assert _alembic_imported(url)
    db = Database(url)
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == \
            migrate.head_revision()
        conn.exec_driver_sql("SELECT ended_seq FROM runs")
    db.close()


def test_the_gateways_migrations_run_apart_once_and_a_failure_says_so(tmp_path: Path) -> None:
    from hearth.store.upgrade import MigrationFailed, upgrade_apart

    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert upgrade_apart(url)  # a new database: a child made the schema
    assert not upgrade_apart(url)  # current: nothing runs
    db = Database(url)
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == \
            migrate.head_revision()
    db.close()
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(MigrationFailed, match="hearth db upgrade"):
        upgrade_apart(f"sqlite:///{tmp_path / 'junk.db'}")
