"""The one writer: a thread that owns the write connection and commits what arrives together.

Every write goes through the one connection this module holds, one transaction at a time. An
awaited write (`Database.writing`) is a *job*: a function of the connection, queued here. The
writer thread takes the first job that waits, then every other one queued behind it, and runs
them in one transaction, each inside its own savepoint, with one commit and so one fsync (group
commit). A job that raises is rolled back to its savepoint and fails alone, with the error it
would have raised alone; the others commit. Each job's caller is answered only after the
commit, so an awaited durable write is on disk when the `await` returns (invariant 1).

A batch is synced as its most demanding job asks: one durable job (a promise) makes the whole
batch `synchronous=FULL`; bookkeeping alone commits at `NORMAL`.

A blocking write (`Database.write()`, for code already on a thread) borrows the same
connection under the same lock, so there is still one writer; it does not batch.

On PostgreSQL's replicas a gateway whose lease may have run out must write nothing more (another
replica may be resuming its turns): `fence`, when set, is asked before every commit, and a
sentence from it stops the writer as a failed commit does, the batch rolled back.

A connection lost before the commit (PostgreSQL restarting) fails the whole batch, each caller
answered with the error (nothing of it was committed), and the next batch connects again.
When a commit fails the transaction's fate is unknown and nothing after it can be trusted, so
the writer stops: every waiting caller, and every later one, fails with `WriterDied`, and the
`on_death` callback (the gateway's: it ends the process with the sentence) is told once.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from hearth.store.errors import WriterDied
from hearth.threads import start_daemon

log = logging.getLogger(__name__)

MAX_BATCH = 128  # jobs in one transaction; the rest wait for the next


@dataclass
class Job:
    """One awaited write: `fn(conn, *args)`, answered on `loop` through `future`."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    durable: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    outcome: tuple[bool, Any] = (False, None)  # (ok, result or exception)


class Writer:
    """Owns the write connection; see the module docstring."""

    def __init__(self, engine: Engine, synchronous: str, sqlite: bool,
                 on_death: Callable[[str], None] | None = None) -> None:
        self._engine = engine
        self._synchronous = synchronous
        self._sqlite = sqlite
        self.on_death = on_death
        self.fence: Callable[[], str | None] | None = None  # why nothing may commit now
        # told each commit's time (seconds, begin to commit) and its jobs, in this thread,
        # after they are answered (engine/observe: the metrics' histogram, a turn's spans);
        # it must return at once and never raise
        self.on_commit: Callable[[float, list[Job]], None] | None = None
        self._lock = threading.Lock()
        self._held = threading.local()  # set while this thread holds the connection
        self._conn: Connection | None = None
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._current: list[Job] = []
        self._start_lock = threading.Lock()
        self.died: str | None = None
        self.batches = 0  # transactions committed for jobs (benchmarks read these)
        self.jobs = 0
        self.synced = 0  # of the batches, those committed synced (one durable job or more)

    # -- the awaited path -------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        if self.died is not None:
            raise WriterDied(self.died)
        self._ensure_thread()
        self._queue.put(job)

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = start_daemon(self._run, "hearth-writer")

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as error:  # the thread must not end with callers waiting
            self._die(f"The database writer failed ({_short(error)}); the gateway stops.")
            _answer_all(self._current, WriterDied(self.died or ""))
            self._fail_waiting()
            raise

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(nxt)
            self._current = batch
            self._commit(batch)
            self._current = []
            if self.died is not None:
                self._fail_waiting()
                return

    def _commit(self, batch: list[Job]) -> None:
        with self._lock, self._holding():
            began = time.monotonic()
            try:
                conn = self._connection()
                tx = self._begin(conn, any(job.durable for job in batch))  # synced if one is
            except SQLAlchemyError as error:  # no connection, or the write lock could not be
                # had: fail this batch
                self._discard_connection()  # and start the next on a fresh connection
                _answer_all(batch, error)
                return
            alone, durable = len(batch) == 1, any(job.durable for job in batch)
            for job in batch:
                _run_job(conn, job, alone=alone)
            lost = _connection_lost(batch)
            if lost is not None:  # nothing of the batch was committed: it fails whole, and
                self._discard_connection()  # the next batch takes a fresh connection
                _answer_all(batch, lost)
                return
            if alone and not batch[0].outcome[0]:
                tx.rollback()  # its only job failed: nothing of it stays
                _answer(batch[0])
                return
            fenced = self.fence() if self.fence is not None else None
            if fenced is not None:
                tx.rollback()
                self._die(fenced)
                _answer_all(batch, WriterDied(fenced))
                return
            try:
                tx.commit()
            except SQLAlchemyError as error:
                self._die(f"The database could not commit a write ({_short(error)}); "
                          "the gateway stops rather than go on without knowing what is on disk.")
                _answer_all(batch, WriterDied(self.died or ""))
                return
        self.batches += 1
        self.jobs += len(batch)
        self.synced += durable
        took = time.monotonic() - began
        for job in batch:
            _answer(job)
        if self.on_commit is not None:
            self.on_commit(took, batch)

    def _begin(self, conn: Connection, durable: bool) -> Any:
        if self._sqlite:
            _set_synchronous(conn, self._synchronous if durable else "NORMAL")
            conn.info["begin_mode"] = "BEGIN IMMEDIATE"
        return conn.begin()

    def _die(self, sentence: str) -> None:
        self.died = sentence
        log.critical("%s", sentence)
        if self.on_death is not None:
            self.on_death(sentence)

    def _fail_waiting(self) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                _answer_all([job], WriterDied(self.died or ""))

    # -- the blocking path ------------------------------------------------------------------

    @contextmanager
    def borrow(self, durable: bool) -> Iterator[Connection]:
        """The write connection in a transaction, for a caller already on a thread."""
        if self.died is not None:
            raise WriterDied(self.died)
        if getattr(self._held, "on", False):
            raise RuntimeError("a write was opened inside another write on the same thread; "
                               "pass the open connection down instead")
        with self._lock, self._holding():
            conn = self._connection()
            with self._begin(conn, durable):
                yield conn

    @contextmanager
    def _holding(self) -> Iterator[None]:
        self._held.on = True
        try:
            yield
        finally:
            self._held.on = False

    def _discard_connection(self) -> None:
        if self._conn is not None:
            self._conn.invalidate()
            self._conn = None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self._engine.connect()
        return self._conn

    def close(self) -> None:
        """Finish what is queued, stop the thread, close the connection."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join(timeout=30)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _run_job(conn: Connection, job: Job, *, alone: bool) -> None:
    """Run one job inside its own savepoint (none when it is alone in the batch: then the
    caller rolls the whole transaction back if it fails)."""
    savepoint = None if alone else conn.begin_nested()
    try:
        result = job.context.run(job.fn, conn, *job.args)
    except Exception as error:  # noqa: BLE001 - the job's own failure, handed to its caller
        job.outcome = (False, error)
        if savepoint is not None:
            try:
                savepoint.rollback()
            except DBAPIError as lost:  # the connection went with it: the batch fails whole
                if not lost.connection_invalidated:
                    raise
        return
    if savepoint is not None:
        savepoint.commit()
    job.outcome = (True, result)


def _connection_lost(batch: list[Job]) -> BaseException | None:
    """The error of a job whose connection was lost (the server restarted, the network
    failed): before the commit, so nothing of the transaction stands."""
    for job in batch:
        ok, error = job.outcome
        if not ok and isinstance(error, DBAPIError) and error.connection_invalidated:
            return error
    return None


def _answer(job: Job) -> None:
    ok, value = job.outcome
    if ok:
        _settle(job, value, None)
    else:
        _settle(job, None, value)


def _answer_all(batch: list[Job], error: BaseException) -> None:
    for job in batch:
        _settle(job, None, error)


def _settle(job: Job, result: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if job.future.done():
            return
        if error is None:
            job.future.set_result(result)
        else:
            job.future.set_exception(error)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop has closed: nobody waits any more
        pass


def _set_synchronous(conn: Connection, level: str) -> None:
    """Set PRAGMA synchronous on this connection, outside any transaction."""
    if conn.info.get("synchronous") != level:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute(f"PRAGMA synchronous={level}")
        conn.info["synchronous"] = level


def _short(error: BaseException) -> str:
    return str(getattr(error, "orig", None) or error).splitlines()[0][:200]
