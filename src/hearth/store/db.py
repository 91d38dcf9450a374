"""The database handle: engine creation, SQLite pragmas, the two ways in, migrations.

Every dialect-specific statement Hearth issues lives in `store/` and most of it here: WAL mode,
`synchronous`, the busy timeout, `secure_delete`, the checkpoint after a forgetting and
`BEGIN IMMEDIATE` for writers on SQLite. PostgreSQL needs none of it.

Two ways in, one rule each. Code on the event loop awaits: `await db.reading(fn, ...)` runs
`fn(conn, ...)` in a read transaction on a small pool of reader threads, and
`await db.writing(fn, ...)` hands it to the one writer (`store/writer.py`), which commits what
arrives together in one transaction. Code already on a thread (the CLI, a worker) may use the
blocking `with db.read()` / `with db.write()`; on a thread that runs an event loop they raise
`BlockingOnLoop`, so the loop never waits on SQLite or an fsync.

Two durability classes of write. A *promise* (`durable=True`, the default: a message
acknowledged, a tool call recorded started before it runs, a recovery attempt counted, an
ending) is synced to disk before the call returns (`synchronous=FULL`). *Bookkeeping*
(`durable=False`: the turn's events, checkpoints, claims) survives any crash of the process but
may be lost with power (`NORMAL`); in WAL mode the next promise's sync carries every earlier
write with it.

What is deleted leaves no bytes behind: every connection runs with `secure_delete` (a deleted
row's bytes and freed pages are overwritten with zeros), and after a forgetting (a chat
deleted, a Temporary chat ended) `truncate_wal()` folds the write-ahead log into the database
file and truncates it, so no frame of an earlier transaction keeps the old text in `-wal`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError

from hearth.extras import require_for_url
from hearth.store import migrate
from hearth.store.writer import Job, Writer
from hearth.threads import ContextCarryingExecutor

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
BUSY_TIMEOUT_MS = 30000
CHECKPOINT_SECONDS = 1.0  # how long a checkpoint waits for readers of older snapshots
CHECKPOINT_TRY_MS = 100  # the busy timeout of one attempt within that
READERS = 2  # reader threads behind `reading()`

P = ParamSpec("P")
T = TypeVar("T")


class BlockingOnLoop(RuntimeError):
    """A blocking store call was made on a thread that runs an event loop."""

    def __init__(self, what: str) -> None:
        super().__init__(f"db.{what}() blocks, and this thread runs the event loop: "
                         f"await db.{'reading' if what == 'read' else 'writing'}(...) instead")


def now() -> float:
    return time.time()


class Database:
    """The one authority on disk; see the module docstring for its two ways in."""

    def __init__(self, url: str, synchronous: str = "FULL", readers: int = READERS) -> None:
        self.url = url
        self.synchronous = synchronous
        self.engine = _make_engine(url)
        self.writer = Writer(self.engine, synchronous, self.dialect == "sqlite")
        self._readers = ContextCarryingExecutor(max_workers=readers,
                                                thread_name_prefix="hearth-read")
        self._reader_local = threading.local()
        self._reader_conns: list[Connection] = []
        self._reader_lock = threading.Lock()

    @property
    def dialect(self) -> str:
        name = self.engine.dialect.name
        return "postgresql" if name.startswith("postgres") else name

    # -- awaited: for code on the event loop ---------------------------------------------------

    async def reading(self, fn: Callable[Concatenate[Connection, P], T],
                      *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(conn, *args)` in one read transaction on a reader thread (one snapshot)."""
        future = self._readers.submit(self._read_job, lambda conn: fn(conn, *args, **kwargs))
        return await asyncio.wrap_future(future)

    async def writing(self, fn: Callable[..., T], *args: Any, durable: bool = True,
                      **kwargs: Any) -> T:
        """`fn(conn, *args, **kwargs)` in the one writer's next transaction, committed (and
        for a durable write synced) before this returns. `fn` raising fails this caller alone.
        `durable=False` for bookkeeping."""
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, **kwargs) if kwargs else fn
        job = Job(call, args, durable, loop, loop.create_future())
        self.writer.submit(job)
        result: T = await job.future
        return result

    def _read_job(self, call: Callable[[Connection], T]) -> T:
        """`call` in a read transaction on this reader thread's connection; once more on a
        new one when the connection was found lost (PostgreSQL restarted since: a read is
        safe to repeat)."""
        try:
            return self._read_on(self._reader_connection(), call)
        except DBAPIError as error:
            if not error.connection_invalidated:
                raise
        return self._read_on(self._reader_connection(), call)

    @staticmethod
    def _read_on(conn: Connection, call: Callable[[Connection], T]) -> T:
        with conn.begin():
            return call(conn)

    def _reader_connection(self) -> Connection:
        conn = getattr(self._reader_local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self.engine.connect()
            self._reader_local.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    # -- blocking: for code already on a thread ------------------------------------------------

    @contextmanager
    def write(self, durable: bool = True) -> Iterator[Connection]:
        """A transaction on the writer's connection (on SQLite it takes the write lock at
        BEGIN). `durable=False` for bookkeeping (see the module docstring)."""
        _refuse_on_loop("write")
        with self.writer.borrow(durable) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        _refuse_on_loop("read")
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def beside(self) -> Iterator[Connection]:
        """A transaction on a connection of its own, beside the writer: for the replicas'
        heartbeat (`engine/background/replica.py`), which must not wait behind the writer's
        queue, nor the writer behind it. Blocking: from a thread."""
        _refuse_on_loop("beside")
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def upgrade(self) -> None:
        """Apply every Alembic migration not yet applied (idempotent). A database already at
        the newest migration is seen so without importing Alembic (`store/migrate.py`)."""
        with self.engine.connect() as conn:
            if migrate.is_current(conn, migrate.head_revision()):
                return
        from alembic import command
        from alembic.config import Config as AlembicConfig

        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()

    def vacuum_said(self) -> None:
        """PostgreSQL: VACUUM the tables holding what was said, so the rows a deletion left
        dead are pruned from their pages now rather than when autovacuum comes. What VACUUM
        frees may keep old bytes until the space is reused, and the write-ahead log keeps
        them until its segments are recycled (docs/postgres.md says so)."""
        _refuse_on_loop("vacuum_said")
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in SAID_TABLES:
                if conn.exec_driver_sql(f"SELECT to_regclass('{table}')").scalar():
                    conn.exec_driver_sql(f"VACUUM {table}")

    def truncate_wal(self, within: float = CHECKPOINT_SECONDS) -> bool:
        """After a deletion (a chat deleted, an item forgotten): on SQLite, fold the
        write-ahead log into the database file and truncate it to nothing. A reader still on
        an older snapshot holds it back, so it is tried again until `within` seconds have
        passed; False (and a warning) when it could not finish by then. On PostgreSQL, VACUUM
        the tables that hold what was said (`vacuum_said`). Blocking: call it from a
        thread."""
        if self.dialect == "postgresql":
            self.vacuum_said()
            return True
        if self.dialect != "sqlite":
            return True
        _refuse_on_loop("truncate_wal")
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
        self.writer.close()
        self._readers.shutdown(wait=True)
        with self._reader_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        self.engine.dispose()


# the tables that hold what was said (a message, a summary, memory), vacuumed after a deletion
SAID_TABLES = ("transcript_events", "chat_search_messages", "context_summaries", "memory_items",
               "tool_calls", "approvals", "deliveries")


def _refuse_on_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise BlockingOnLoop(what)


def _make_engine(url: str) -> Engine:
    require_for_url(url)  # PostgreSQL's driver is an extra: without it, one sentence
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

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
