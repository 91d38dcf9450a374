"""The one writer: writes that arrive together commit together, each caller learns only its
own fate, an awaited write is committed when the await returns, and a writer that cannot
commit stops everything rather than leave a caller waiting."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError

from hearth.store import sessions as session_store
from hearth.store.db import Database
from hearth.store.errors import SessionNotFound, WriterDied
from hearth.store.schema import sessions


def _chat(conn: Connection, key: str) -> str:
    session_store.insert(conn, key=key, tab_id="t", memory_mode="persistent", chat_number=None)
    return key


def _keys(db: Database) -> set[str]:
    with db.read() as conn:
        return set(conn.execute(select(sessions.c.key)).scalars())


class Gate:
    """A job that holds the writer inside its transaction until released, so the jobs
    queued meanwhile are all waiting when it lets go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, conn: Connection) -> str:
        self.entered.set()
        assert self.release.wait(10)
        return _chat(conn, "gate")


def test_writes_that_arrive_together_commit_in_one_transaction(db: Database) -> None:
    """Twenty writes queued while the writer is busy land in one more transaction (one
    fsync), and each caller gets its own result."""
    gate = Gate()

    async def body() -> list[str]:
        held = asyncio.ensure_future(db.writing(gate))
        await asyncio.to_thread(gate.entered.wait, 10)
        batches = db.writer.batches
        waiting = [asyncio.ensure_future(db.writing(_chat, f"chat-{i}")) for i in range(20)]
        await asyncio.sleep(0.05)  # every job is queued behind the gate
        gate.release.set()
        await held
        done = await asyncio.gather(*waiting)
        assert db.writer.batches - batches == 2  # the gate's transaction, then the twenty's
        return done

    done = asyncio.run(body())
    assert done == [f"chat-{i}" for i in range(20)]
    assert _keys(db) == {"gate", *done}


def _half_then_fail(conn: Connection) -> None:
    _chat(conn, "doomed")  # written, then the job fails: it must not stay
    raise SessionNotFound("nowhere")


def test_a_failing_write_fails_alone_and_leaves_nothing(db: Database) -> None:
    """In a shared transaction, the write that raises is rolled back to its own savepoint:
    its caller gets the error it would get alone, the others commit."""
    gate = Gate()

    async def body() -> tuple[Any, ...]:
        held = asyncio.ensure_future(db.writing(gate))
        await asyncio.to_thread(gate.entered.wait, 10)
        before = asyncio.ensure_future(db.writing(_chat, "before"))
        doomed = asyncio.ensure_future(db.writing(_half_then_fail))
        duplicate = asyncio.ensure_future(db.writing(_chat, "before"))  # the key is taken
        after = asyncio.ensure_future(db.writing(_chat, "after"))
        await asyncio.sleep(0.05)
        gate.release.set()
        await held
        return tuple(await asyncio.gather(before, doomed, duplicate, after,
                                          return_exceptions=True))

    before, doomed, duplicate, after = asyncio.run(body())
    assert (before, after) == ("before", "after")
    assert isinstance(doomed, SessionNotFound)
    assert isinstance(duplicate, IntegrityError)
    assert _keys(db) == {"gate", "before", "after"}


def test_a_lone_failing_write_leaves_nothing(db: Database) -> None:
    async def body() -> None:
        with pytest.raises(SessionNotFound):
            await db.writing(_half_then_fail)

    asyncio.run(body())
    assert _keys(db) == set()


def test_an_awaited_write_is_committed_when_the_await_returns(db: Database) -> None:
    """Seen at once from another connection (the reader pool's, or a new one)."""

    async def body() -> tuple[bool, bool]:
        await db.writing(_chat, "kept")
        pooled = await db.reading(session_store.get, "kept") is not None
        return pooled, "kept" in await asyncio.to_thread(_keys, db)

    assert asyncio.run(body()) == (True, True)


def test_reads_see_one_snapshot_and_carry_the_callers_context(db: Database) -> None:
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")

    def seen(conn: Connection) -> str:
        conn.execute(text("SELECT 1"))
        return marker.get()

    async def body() -> tuple[str, str]:
        marker.set("chat-7")
        return await db.reading(seen), await db.writing(seen)

    assert asyncio.run(body()) == ("chat-7", "chat-7")


def _orphan(conn: Connection) -> None:
    """A row whose foreign key fails only at COMMIT: the commit itself fails."""
    conn.exec_driver_sql("PRAGMA defer_foreign_keys=ON")
    conn.exec_driver_sql(
        "INSERT INTO transcript_events (session_key, seq, event_id, kind, content, meta, "
        "created_at) VALUES ('no-such-chat', 1, 'e1', 'user', '{}', '{}', 0)")


def test_a_writer_that_cannot_commit_stops_and_says_so(db: Database) -> None:
    """Every caller of the failed transaction and every later one fails with WriterDied (no
    one is left waiting), and the gateway's callback is told once, with a sentence."""
    if db.dialect != "sqlite":
        pytest.skip("a commit is made to fail by a foreign key deferred to it, which SQLite "
                    "allows any key and PostgreSQL only a key declared DEFERRABLE")
    told: list[str] = []
    db.writer.on_death = told.append

    async def body() -> tuple[BaseException, BaseException]:
        with pytest.raises(WriterDied) as first:
            await db.writing(_orphan)
        with pytest.raises(WriterDied) as later:
            await db.writing(_chat, "later")
        return first.value, later.value

    first, later = asyncio.run(body())
    assert len(told) == 1 and "could not commit" in told[0] and "stops" in told[0]
    assert str(first) == str(later) == told[0]
    with pytest.raises(WriterDied):
        with db.write():
            pass
    assert _keys(db) == set()
