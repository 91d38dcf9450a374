"""The database handle: engine creation, SQLite pragmas, transactions, migrations.

Every dialect-specific statement Hearth issues lives in `store/` and most of it here: WAL mode,
`synchronous`, the busy timeout, `secure_delete`, the checkpoint after a forgetting and
`BEGIN IMMEDIATE` for writers on SQLite. PostgreSQL needs none of it.

Two durability classes of write. A *promise* (`write()`: a message acknowledged, a tool call
recorded started before it runs, a recovery attempt counted, an ending) is synced to disk
before it returns (`synchronous=FULL`). *Bookkeeping* (`write(durable=False)`: the turn's
events, checkpoints, claims) survives any crash of the process but may be lost with power
(`NORMAL`); in WAL mode the next promise's sync carries every earlier write with it.

What is deleted leaves no bytes behind: every connection runs with `secure_delete` (a deleted
row's bytes and freed pages are overwritten with zeros), and after a forgetting (a chat
deleted, a Temporary chat ended) `truncate_wal()` folds the write-ahead log into the database
file and truncates it, so no frame of an earlier transaction keeps the old text in `-wal`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
BUSY_TIMEOUT_MS = 30000
CHECKPOINT_SECONDS = 1.0  # how long a checkpoint waits for readers of older snapshots
CHECKPOINT_TRY_MS = 100  # the busy timeout of one attempt within that


def now() -> float:
    return time.time()


class Database:
    """The one authority on disk. `write()` and `read()` hand out transactions."""

    def __init__(self, url: str, synchronous: str = "FULL") -> None:
        self.url = url
        self.synchronous = synchronous
        self.engine = _make_engine(url)

    @property
    def dialect(self) -> str:
        name = self.engine.dialect.name
        return "postgresql" if name.startswith("postgres") else name

    @contextmanager
    def write(self, durable: bool = True) -> Iterator[Connection]:
        """A transaction that will write: on SQLite it takes the write lock at BEGIN.

        `durable=False` for bookkeeping that a crash of the process must not lose but a loss
        of power may (see the module docstring).
        """
        with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                _set_synchronous(conn, self.synchronous if durable else "NORMAL")
                conn.info["begin_mode"] = "BEGIN IMMEDIATE"
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def upgrade(self) -> None:
        """Apply every Alembic migration not yet applied (idempotent)."""
        from alembic import command
        from alembic.config import Config as AlembicConfig

        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()

    def truncate_wal(self, within: float = CHECKPOINT_SECONDS) -> bool:
        """Fold the write-ahead log into the database file and truncate it to nothing (SQLite;
        elsewhere there is none: True). A reader still on an older snapshot holds it back, so
        it is tried again until `within` seconds have passed; False (and a warning) when it
        could not finish by then. Blocking: call it from a thread."""
        if self.dialect != "sqlite":
            return True
        deadline = time.monotonic() + within
        with self.engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute(f"PRAGMA busy_timeout={CHECKPOINT_TRY_MS}")
            try:
                while True:
                    busy = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                    if not busy:
                        return True
                    if time.monotonic() >= deadline:
                        log.warning("the write-ahead log could not be checkpointed within "
                                    "%.1f s (a reader held it); the next checkpoint will", within)
                        return False
                    time.sleep(0.02)
            finally:
                raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def close(self) -> None:
        self.engine.dispose()


def _set_synchronous(conn: Connection, level: str) -> None:
    """Set PRAGMA synchronous on this pooled connection, outside any transaction."""
    if conn.info.get("synchronous") != level:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute(f"PRAGMA synchronous={level}")
        conn.info["synchronous"] = level


def _make_engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        poolclass=NullPool if ":memory:" in url else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA secure_delete=ON")  # what is deleted is overwritten with zeros
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.info.pop("begin_mode", "BEGIN"))

    return engine
