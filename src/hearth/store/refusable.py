"""A statement the database may refuse (a unique key taken), run so that its refusal leaves
the transaction usable, on each engine.

SQLite undoes a refused statement alone and the transaction goes on. PostgreSQL aborts the
whole transaction at the first error, so there the statement gets a savepoint of its own,
and a refusal rolls back to it. SQLite pays nothing for it (no SAVEPOINT on a turn's path)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection


@contextmanager
def refusable(conn: Connection) -> Iterator[None]:
    if conn.dialect.name == "sqlite":
        yield
        return
    with conn.begin_nested():
        yield
