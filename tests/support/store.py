"""Stores for tests: `migrated` (a store in a folder, migrated to the newest schema) and
`migrated_store` (the same, closed afterwards); and reading a gateway's database file straight,
as any other program would, never through the gateway: `db_rows`, `rows_of` (a chat's rows
table by table), `audit_rows`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from hearth.store.db import Database
from tests.gateway import Gateway

CHILD_TABLES = ("transcript_events", "runs", "tool_calls", "approvals")


def migrated(folder: Path, name: str = "t.db") -> Database:
    """A store in the file `folder/name`, migrated to the newest schema."""
    database = Database(f"sqlite:///{folder / name}")
    database.upgrade()
    return database


@contextmanager
def migrated_store(folder: Path, name: str = "t.db") -> Iterator[Database]:
    """A `migrated` store, closed when the block ends."""
    database = migrated(folder, name)
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
