"""Stores for tests: `migrated` (a store in a folder, migrated to the newest schema) and
`migrated_store` (the same, closed afterwards); `seed` and `seed_home`, a new store put where
a gateway or an engine will open one; and reading a gateway's database file straight, as any
other program would, never through the gateway: `db_rows`, `rows_of` (a chat's rows table by
table), `audit_rows`.

A new store is a copy of a template: one SQLite file per test process, migrated by Alembic for
real the first time one is asked for. Migrating each test's store from nothing would cost
~0.05 s (more on a loaded machine) thousands of times over; the copy is at the newest
migration, so `Database.upgrade()` on it only reads its version. The tests of the migrations
themselves ask for `migrated(..., template=False)`, or start from an older file of their own."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hearth.store.db import Database

if TYPE_CHECKING:
    from tests.gateway import Gateway

CHILD_TABLES = ("transcript_events", "runs", "tool_calls", "approvals", "attachments")
_TEMPLATE: list[Path] = []


def _template() -> Path:
    """This process's migrated template file (made on first use, removed at exit)."""
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="hearth-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "template.db"
        database = Database(f"sqlite:///{path}")
        try:
            database.upgrade()
        finally:
            database.close()
        left = [p.name for p in folder.iterdir() if p != path]
        assert not left, f"the template store left {left} beside it: a copy would miss them"
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def seed(path: Path) -> None:
    """A new store at `path` (a copy of the template, owner-only), unless one is there."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), path)
    path.chmod(0o600)


def seed_home(home: Path, env: Mapping[str, str] = os.environ) -> None:
    """The store a gateway on `home` opens first (`hearth.db`), unless `env` points it at
    another database or the home has one."""
    if not env.get("HEARTH_DATABASE_URL"):
        seed(home / "hearth.db")


def migrated(folder: Path, name: str = "t.db", template: bool = True) -> Database:
    """A store in the file `folder/name`, migrated to the newest schema: a copy of the
    template, or with `template=False` migrated from nothing by Alembic."""
    if template:
        seed(folder / name)
    database = Database(f"sqlite:///{folder / name}")
    database.upgrade()
    return database


@contextmanager
def migrated_store(folder: Path, name: str = "t.db", template: bool = True
                   ) -> Iterator[Database]:
    """A `migrated` store, closed when the block ends."""
    database = migrated(folder, name, template)
    try:
        yield database
    finally:
        database.close()


def _read_only(home: Path) -> closing[sqlite3.Connection]:
    """The gateway's database file under `home`, opened read-only (waiting out a writer)."""
    return closing(sqlite3.connect(f"file:{home / 'hearth.db'}?mode=ro", uri=True, timeout=30))


def db_rows(gateway: Gateway, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows `sql` (with `args`) reads from the gateway's database file."""
    with _read_only(gateway.home) as conn:
        return conn.execute(sql, args).fetchall()


def rows_of(home: Path, key: str) -> dict[str, int]:
    """How many rows of each table belong to the chat `key`."""
    with _read_only(home) as conn:
        counts = {"sessions": conn.execute("SELECT count(*) FROM sessions WHERE key = ?",
                                           (key,)).fetchone()[0]}
        for table in CHILD_TABLES:
            counts[table] = conn.execute(f"SELECT count(*) FROM {table} WHERE session_key = ?",
                                         (key,)).fetchone()[0]
    return counts


def audit_rows(home: Path, action: str = "chat.deleted") -> list[dict[str, Any]]:
    """The audit rows of `action`, oldest first, their detail read as JSON."""
    with _read_only(home) as conn:
        rows = conn.execute("SELECT action, actor, session_key, run_id, detail FROM audit "
                            "WHERE action = ? ORDER BY id", (action,)).fetchall()
    return [{"action": a, "actor": who, "session_key": key, "run_id": run,
             "detail": json.loads(detail)} for a, who, key, run, detail in rows]
