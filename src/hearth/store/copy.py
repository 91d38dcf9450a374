"""`hearth db copy --to URL`: every kept row of one database into another, empty one (from
SQLite to PostgreSQL, to move), then each table's rows counted on both sides.

What is copied is what the gateway keeps: the persistent chats and every row that belongs to
one (by its `session_key`), memory, jobs, grants, apps, the usage ledger and the rest. An
Incognito or Temporary chat's rows (or a chat in a mode this version does not know) are left
out: such a chat keeps nothing, by any path, and a copy is a path. The target is migrated to
the newest schema first and must hold no row; its search index is filled by its own triggers
as the messages arrive, and its id sequences are set past the ids copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, Table, func, select, text

from hearth.store.db import Database
from hearth.store.schema import RUNTIME_TABLES, metadata, runs, sessions

BATCH = 500  # rows read and written at a time
KEPT = "persistent"

Progress = Callable[[str, int, int], None]  # (table, rows copied so far, rows to copy)


class CopyRefused(Exception):
    """The copy cannot be made (the target is not empty, or is the source)."""


@dataclass(frozen=True)
class Counted:
    table: str
    source: int  # the rows of the source the copy takes
    target: int  # the rows the target holds after it

    @property
    def ok(self) -> bool:
        return self.source == self.target


def copy(source: Database, target: Database, progress: Progress | None = None
         ) -> list[Counted]:
    """Copy `source`'s kept rows into `target` (migrated here; CopyRefused unless empty), in
    one transaction of the target's; the counts of each table on both sides."""
    if source.engine.url == target.engine.url:
        raise CopyRefused("The target is the database being copied.")
    target.upgrade()
    with source.engine.connect() as read, target.engine.begin() as write:
        held = _rows_held(write)
        if held:
            raise CopyRefused(f"The target already holds rows ({held}): copy into an empty "
                              "database.")
        for table in _kept_tables():
            _copy_table(read, write, table, progress)
        _advance_sequences(write)
    with source.engine.connect() as read, target.engine.connect() as written:
        return [Counted(t.name, _count(read, t), int(written.execute(
            select(func.count()).select_from(t)).scalar_one())) for t in _kept_tables()]


def _kept_tables() -> list[Table]:
    """The tables a copy takes: not the gateways' own (which replicas run, who leads)."""
    return [t for t in metadata.sorted_tables if t.name not in RUNTIME_TABLES]


def _kept(table: Table) -> list[ColumnElement[bool]]:
    """The source's rows of `table` a copy takes: none of a chat that keeps nothing."""
    if table is sessions:
        return [sessions.c.memory_mode == KEPT]
    if "session_key" in table.c:
        kept = select(sessions.c.key).where(sessions.c.memory_mode == KEPT)
        column = table.c.session_key
        return [column.is_(None) | column.in_(kept)]
    return []


def _count(conn: Connection, table: Table) -> int:
    return int(conn.execute(select(func.count()).select_from(table)
                            .where(*_kept(table))).scalar_one())


def _copy_table(read: Connection, write: Connection, table: Table,
                progress: Progress | None) -> None:
    total = _count(read, table)
    done = 0
    if progress is not None:
        progress(table.name, done, total)
    for batch in _batches(read, table):
        if table is runs:  # no gateway of the target runs them yet: its first start takes
            batch = [{**row, "replica": None} for row in batch]  # back those left running
        write.execute(table.insert(), batch)
        done += len(batch)
        if progress is not None:
            progress(table.name, done, total)


def _batches(conn: Connection, table: Table) -> Iterator[list[dict[str, object]]]:
    order = list(table.primary_key.columns) or list(table.c)
    rows = conn.execution_options(yield_per=BATCH).execute(
        select(table).where(*_kept(table)).order_by(*order)).mappings()
    batch: list[dict[str, object]] = []
    for row in rows:
        batch.append(dict(row))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _rows_held(conn: Connection) -> str:
    """The tables of the target that hold rows, with how many (empty: none)."""
    held = []
    for table in metadata.sorted_tables:
        count = int(conn.execute(select(func.count()).select_from(table)).scalar_one())
        if count:
            held.append(f"{table.name}: {count}")
    return ", ".join(held)


def _advance_sequences(conn: Connection) -> None:
    """PostgreSQL: each table's id sequence past the ids copied (explicit ids leave it)."""
    if conn.dialect.name != "postgresql":
        return
    for table in metadata.sorted_tables:
        if "id" not in table.c or not table.c.id.primary_key:
            continue
        sequence = conn.execute(text("SELECT pg_get_serial_sequence(:t, 'id')"),
                                {"t": table.name}).scalar()
        if sequence:
            conn.execute(text(f"SELECT setval(:s, COALESCE((SELECT max(id) FROM "
                              f"{table.name}), 0) + 1, false)"), {"s": sequence})
