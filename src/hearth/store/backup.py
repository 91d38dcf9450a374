"""A backup's database: a consistent snapshot of the store taken while the gateway serves,
holding what the gateway keeps and nothing a restricted or deleted chat said.

SQLite: the online backup API (`sqlite3.Connection.backup`, from a connection of its own, in
one step: one read transaction, so the copy is one moment of the database while the writer
goes on in the write-ahead log) into a new file, never a copy of the database file. Then, in
that copy only: every row of an Incognito, Temporary or unreadable chat is deleted (their
sessions, and each table's rows naming them by `session_key`), the gateways' own rows
(`replicas`, `leases`) go (a restored gateway takes back what was left running), both
full-text indexes are merged (`optimize`: FTS5 keeps a deleted row's words in its segments
until a merge), and the copy is VACUUMed with `secure_delete` on, so neither the freed pages
nor the index hold a byte of what was deleted. The copy is left in rollback-journal mode:
one file, no `-wal` beside it.

PostgreSQL is `store/pg_dump.py`'s. `check_sqlite` is what `--verify` and a restore ask of a
snapshot: SQLite's integrity check, no chat that keeps nothing, and the schema this Hearth's
migrations make at its revision, no more and no less (`store/schema_check.py`).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from hearth.store.schema_check import difference

KEPT = "persistent"  # the one mode a backup keeps (privacy/modes.py)
RUNTIME_TABLES = ("replicas", "leases")  # which gateways run, who leads: never restored
DERIVED_PREFIXES = ("chat_search", "memory_fts")  # indexes their own triggers keep
FTS_TABLES = ("chat_search", "memory_fts")
STEP_PAGES = -1  # the whole database in one step: one read transaction, one moment


@dataclass(frozen=True)
class Snapshot:
    """A database snapshot made for a backup."""

    engine: str  # "sqlite" | "postgresql"
    revision: str | None  # the Alembic revision it is at
    path: Path  # the file holding it
    kept_chats: tuple[str, ...]  # the chats it keeps (their folders go with it)
    left_out: int  # restricted chats left out


class SnapshotFailed(Exception):
    """The database could not be snapshotted (the sentence says why)."""


def snapshot_sqlite(source: Path, target: Path) -> Snapshot:
    """A scrubbed, vacuumed copy of the SQLite database `source` at `target` (a new file)."""
    if not source.is_file():
        raise SnapshotFailed(f"There is no database at {source}: start the gateway once "
                             "(or run `hearth db upgrade`) first.")
    try:
        _copy_online(source, target)
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            left_out = scrub(conn)
            kept = tuple(row[0] for row in conn.execute(
                "SELECT key FROM sessions ORDER BY key"))
            revision = _revision(conn)
    except sqlite3.Error as error:
        raise SnapshotFailed(f"The database could not be copied ({error}).") from error
    return Snapshot("sqlite", revision, target, kept, left_out)


def _copy_online(source: Path, target: Path) -> None:
    with closing(sqlite3.connect(source, timeout=30)) as live, \
            closing(sqlite3.connect(target)) as copy:
        live.execute("PRAGMA busy_timeout=30000")
        live.backup(copy, pages=STEP_PAGES)


def scrub(conn: sqlite3.Connection) -> int:
    """Delete from the copy every row of a chat that keeps nothing and the gateways' own
    rows, merge the full-text indexes and VACUUM; how many chats were left out."""
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA foreign_keys=OFF")
    tables = _tables(conn)
    conn.execute("BEGIN")
    left_out = conn.execute("SELECT count(*) FROM sessions WHERE memory_mode IS NOT ?",
                            (KEPT,)).fetchone()[0]
    restricted = "(SELECT key FROM sessions WHERE memory_mode IS NOT ?)"
    for table in tables:
        if table != "sessions" and "session_key" in _columns(conn, table) and \
                not table.startswith(DERIVED_PREFIXES):
            conn.execute(f'DELETE FROM "{table}" WHERE session_key IN {restricted}', (KEPT,))
    conn.execute("DELETE FROM sessions WHERE memory_mode IS NOT ?", (KEPT,))
    for table in RUNTIME_TABLES:
        if table in tables:
            conn.execute(f'DELETE FROM "{table}"')
    if "runs" in tables:  # no gateway runs them now: the restored one takes them back
        conn.execute("UPDATE runs SET replica = NULL WHERE replica IS NOT NULL")
    for fts in FTS_TABLES:
        if fts in tables:
            conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
    conn.execute("COMMIT")
    conn.execute("VACUUM")
    return int(left_out)


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


def _revision(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return str(row[0]) if row else None


def check_sqlite(path: Path) -> tuple[str | None, str | None]:
    """What is wrong with the SQLite snapshot at `path` (None: nothing), and its revision."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            revision = _revision(conn)
            restricted = conn.execute("SELECT count(*) FROM sessions WHERE memory_mode IS NOT ?",
                                      (KEPT,)).fetchone()[0]
            unlike = difference(conn, revision) if found == ["ok"] else None
    except sqlite3.Error as error:
        return f"its database does not open ({error})", None
    if found != ["ok"]:
        return f"its database fails SQLite's integrity check ({'; '.join(found[:3])})", None
    if restricted:
        return "its database holds chats that keep nothing (not a backup Hearth made)", None
    return unlike, revision
