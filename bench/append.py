"""Transcript append and read cost against the transcript's length, through the store.

Targets (DESIGN.md: "Appending is O(1) whatever the transcript's length"; "Readers take
windows"):
  * appending one message to a chat of 100,000 messages costs <= 1.5x appending to a chat of 100;
  * reading the last 50 messages of that chat costs <= 1.5x the same read on the chat of 100;
  * the store costs <= 2x the same statements straight through sqlite3, for an append and for
    a window read (blocking, and awaited through the seam the engine uses: `db.writing`, the
    one writer thread; `db.reading`, a reader thread).

Two chats share one SQLite file. Each timed append is its own `db.write()` transaction, so the
figure includes BEGIN IMMEDIATE, the statements and the COMMIT (the WAL fsync with
synchronous=FULL). Each timed read is `transcript.window(conn, key, 50)` inside its own
`db.read()`. Operations alternate between the two chats (ABBA order) so both see the same noise.
Measured with synchronous=FULL (the default) and again with NORMAL for reference.

A benchmark, not a test: it prints figures, ratios and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/append.py [--small 100] [--big 100000] [--ops 1000] [--reads 1000]
        [--bulk-fill] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event, update

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hearth.store import sessions, transcript  # noqa: E402
from hearth.store.db import Database  # noqa: E402
from hearth.store.schema import sessions as sessions_table, transcript_events  # noqa: E402

TARGET_RATIO = 1.5
SQLITE_RATIO = 2.0  # the store's cost against the same statements through sqlite3
FILL_BATCH = 10_000
SMALL_CHATS = 10  # appends rotate over them so each stays near its starting length
TEXT = (
    "Could you look at the notes I left yesterday about the garden plan and tell me which of "
    "the three layouts keeps the tomatoes in the sun longest? Keep it short."
)


# ----------------------------------------------------------------------------- setup


def make_chat(db: Database, key: str, length: int, bulk: bool) -> None:
    """Create a persistent chat and fill it with `length` user events (batched transactions)."""
    with db.write() as conn:
        sessions.insert(conn, key=key, tab_id=uuid.uuid4().hex, memory_mode="persistent",
                        chat_number=None)
    if bulk:
        bulk_fill(db, key, length)
        return
    done = 0
    while done < length:
        batch = min(FILL_BATCH, length - done)
        with db.write() as conn:
            for i in range(batch):
                transcript.append(conn, key, "user", {"text": f"{TEXT} #{done + i}"})
        done += batch


def bulk_fill(db: Database, key: str, length: int) -> None:
    """The same rows `transcript.append` writes, inserted many per statement (--bulk-fill)."""
    parent = None
    for first in range(1, length + 1, FILL_BATCH):
        rows = []
        for seq in range(first, min(length, first + FILL_BATCH - 1) + 1):
            event_id = uuid.uuid4().hex
            rows.append({"session_key": key, "seq": seq, "event_id": event_id,
                         "parent_event_id": parent, "idempotency_key": None, "kind": "user",
                         "content": {"text": f"{TEXT} #{seq}"}, "meta": {},
                         "source_channel": None, "run_id": None, "created_at": time.time()})
            parent = event_id
        with db.write() as conn:
            conn.execute(transcript_events.insert(), rows)
            conn.execute(update(sessions_table).where(sessions_table.c.key == key).values(
                last_seq=rows[-1]["seq"], head_event_id=parent, message_count=rows[-1]["seq"]))


def length_of(db: Database, key: str) -> int:
    with db.read() as conn:
        row = sessions.get(conn, key)
    return row.message_count if row else -1


# ----------------------------------------------------------------------------- timing


def append_once(db: Database, key: str, idem: bool = False) -> None:
    with db.write() as conn:
        transcript.append(conn, key, "user", {"text": TEXT},
                          idempotency_key=f"client:{uuid.uuid4().hex}" if idem else None)


def read_once(db: Database, key: str) -> None:
    with db.read() as conn:
        rows = transcript.window(conn, key, 50)
    assert len(rows) == 50, len(rows)


def timed_pairs(
    op: Callable[[str], None], smalls: Sequence[str], big: str, rounds: int
) -> tuple[list[float], list[float]]:
    """Run `op` `rounds` times on the big chat and on the small ones (in turn), ABBA order."""
    small_times: list[float] = []
    big_times: list[float] = []
    for warm in range(20):  # warm caches, compiled-statement cache, connection pool
        op(smalls[warm % len(smalls)] if warm % 2 else big)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            small = smalls[r % len(smalls)]
            order = ((small, small_times), (big, big_times))
            for key, times in order if r % 2 == 0 else reversed(order):
                start = time.perf_counter()
                op(key)
                times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return small_times, big_times


# ----------------------------------------------------------------------------- raw reference


def raw_connection(path: str, synchronous: str) -> sqlite3.Connection:
    """A plain sqlite3 connection with the pragmas the store sets (the no-SQLAlchemy floor)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in ("journal_mode=WAL", f"synchronous={synchronous}", "busy_timeout=30000",
                   "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def raw_append(conn: sqlite3.Connection, key: str) -> None:
    """What transcript.append does, written straight against sqlite3."""
    conn.execute("BEGIN IMMEDIATE")
    last_seq, head, _writer = conn.execute(
        "SELECT last_seq, head_event_id, writer_run_id FROM sessions WHERE key = ?", (key,)
    ).fetchone()
    seq, event_id, stamp = last_seq + 1, uuid.uuid4().hex, time.time()
    conn.execute("UPDATE sessions SET last_seq = ?, head_event_id = ?, message_count = "
                 "message_count + 1, updated_at = ? WHERE key = ?", (seq, event_id, stamp, key))
    conn.execute(
        "INSERT INTO transcript_events (session_key, seq, event_id, parent_event_id, kind, "
        "content, meta, created_at) VALUES (?, ?, ?, ?, 'user', ?, '{}', ?)",
        (key, seq, event_id, head, json.dumps({"text": TEXT}), stamp),
    )
    conn.execute("COMMIT")


def raw_window(conn: sqlite3.Connection, key: str) -> None:
    """What transcript.window(key, 50) does, JSON decoding included, straight against sqlite3."""
    conn.execute("BEGIN")
    rows = conn.execute("SELECT * FROM transcript_events WHERE session_key = ? "
                        "ORDER BY seq DESC LIMIT 50", (key,)).fetchall()
    conn.execute("COMMIT")
    decoded = [(row, json.loads(row[6]), json.loads(row[7])) for row in rows]
    assert len(decoded) == 50


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(
    label: str, small: list[float], big: list[float], sizes: tuple[int, int],
    target: bool = True,
) -> None:
    s50, b50 = statistics.median(small), statistics.median(big)
    s90, b90 = pct(small, 90), pct(big, 90)
    ratio50, ratio90 = b50 / s50, b90 / s90
    verdict = "MET" if ratio50 <= TARGET_RATIO else "MISSED"
    judged = f"   target median <= {TARGET_RATIO}x: {verdict}" if target else ""
    print(f"  {label}  ({len(small)} per chat)")
    print(f"    chat of {sizes[0]:>7,}: median {s50 * 1e6:8.1f} us   p90 {s90 * 1e6:8.1f} us")
    print(f"    chat of {sizes[1]:>7,}: median {b50 * 1e6:8.1f} us   p90 {b90 * 1e6:8.1f} us")
    print(f"    ratio big/small: median {ratio50:.2f}x  p90 {ratio90:.2f}x{judged}")


# ----------------------------------------------------------------------------- query plans


@contextmanager
def captured(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """Record every statement (and its parameters) the engine sends while inside."""
    seen: list[tuple[str, Any]] = []

    def grab(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        seen.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", grab)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", grab)


def explain(db: Database, statements: list[tuple[str, Any]]) -> None:
    with db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        for statement, params in statements:
            head = statement.split()[0].upper()
            if head in ("BEGIN", "COMMIT", "ROLLBACK"):
                continue
            print(f"    {' '.join(statement.split())}")
            plan = raw.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
            for row in plan or [(0, 0, 0, "(no table access: a plain row insert)")]:
                print(f"      -> {row[3]}")
            if head == "INSERT":
                print("      (the insert itself maintains the primary key and the unique indexes:"
                      " B-tree inserts; its foreign key check is a primary-key lookup on sessions)")


def show_plans(db: Database, big: str) -> None:
    print("\nEXPLAIN QUERY PLAN (chat of the big size), statements exactly as the store sends them")
    print("  append (with an idempotency key, as admission does):")
    with captured(db) as seen, db.write() as conn:
        transcript.append(conn, big, "user", {"text": TEXT},
                          idempotency_key=f"client:{uuid.uuid4().hex}")
    explain(db, seen)
    print("  window(key, 50):")
    with captured(db) as seen, db.read() as conn:
        transcript.window(conn, big, 50)
    explain(db, seen)


# ----------------------------------------------------------------------------- main


def measure(
    path: str, synchronous: str, smalls: Sequence[str], big: str, ops: int, reads: int
) -> None:
    db = Database(f"sqlite:///{path}", synchronous=synchronous)
    raw = raw_connection(path, synchronous)
    loop = asyncio.new_event_loop()
    try:
        sizes = (length_of(db, smalls[0]), length_of(db, big))
        print(f"\nsynchronous={synchronous}  (a chat of {sizes[1]:,} against {len(smalls)} fresh "
              f"chats of {sizes[0]:,}, taken in turn)")
        medians: dict[str, float] = {}

        def timed(name: str, label: str, op: Callable[[str], None], rounds: int,
                  target: bool = True) -> None:
            s, b = timed_pairs(op, smalls, big, rounds)
            report(label, s, b, sizes, target=target)
            medians[name] = statistics.median(s + b)

        timed("append", "append (one db.write() transaction each, commit included)",
              lambda key: append_once(db, key), ops)
        timed("idem", "append with an idempotency key (admission's shape)",
              lambda key: append_once(db, key, idem=True), ops // 2)
        timed("window", "window(key, 50) read (one db.read() each)",
              lambda key: read_once(db, key), reads)
        timed("append_awaited", "append awaited through the seam (db.writing: the one writer "
              "thread, commit included)",
              lambda key: loop.run_until_complete(db.writing(_append, key)), ops // 2)
        timed("window_awaited", "window(key, 50) awaited through the seam (db.reading: a "
              "reader thread)", lambda key: loop.run_until_complete(_read_awaited(db, key)),
              reads // 2)
        timed("raw_append", "reference: the same append straight through sqlite3 (no "
              "SQLAlchemy)", lambda key: raw_append(raw, key), ops // 2, target=False)
        timed("raw_window", "reference: the same window read straight through sqlite3 (JSON "
              "decoded)", lambda key: raw_window(raw, key), reads // 2, target=False)
        grown = max(length_of(db, key) for key in smalls)
        print(f"    (the small chats grew to at most {grown:,} during the run, the big one to "
              f"{length_of(db, big):,})")
        against_sqlite(medians)
    finally:
        loop.close()
        raw.close()
        db.close()


def _append(conn: Connection, key: str) -> None:
    transcript.append(conn, key, "user", {"text": TEXT})


async def _read_awaited(db: Database, key: str) -> None:
    rows = await db.reading(transcript.window, key, 50)
    assert len(rows) == 50, len(rows)


def against_sqlite(medians: dict[str, float]) -> None:
    """The store's cost against the same statements straight through sqlite3 (target <= 2x)."""
    print(f"  the store against sqlite3 (median over both sizes; target <= {SQLITE_RATIO:g}x)")
    for name, raw, what in (("append", "raw_append", "append, db.write()"),
                            ("append_awaited", "raw_append", "append, awaited db.writing()"),
                            ("window", "raw_window", "window read, db.read()"),
                            ("window_awaited", "raw_window", "window read, awaited "
                                                             "db.reading()")):
        ratio = medians[name] / medians[raw]
        verdict = "MET" if ratio <= SQLITE_RATIO else "MISSED"
        print(f"    {what:<36} {medians[name] * 1e6:8.1f} us vs {medians[raw] * 1e6:8.1f} us"
              f"  {ratio:5.2f}x  {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100, help="length of the small chats")
    parser.add_argument("--big", type=int, default=100_000, help="length of the big chat")
    parser.add_argument("--ops", type=int, default=1000, help="timed appends per chat per mode")
    parser.add_argument("--reads", type=int, default=1000, help="timed reads per chat per mode")
    parser.add_argument("--bulk-fill", action="store_true",
                        help="fill with multi-row inserts instead of transcript.append (faster "
                             "set-up, same rows)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="folder for the database (default: a temp folder; fsync cost "
                             "depends on the disk under it)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hearth-bench-", dir=args.dir) as tmp:
        path = f"{tmp}/bench.db"
        print("Hearth bench: transcript append and window read vs transcript length")
        print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
        print(f"  SQLite store at {path} (WAL); targets: big/small <= {TARGET_RATIO}x")
        db = Database(f"sqlite:///{path}")
        db.upgrade()
        started = time.perf_counter()
        make_chat(db, "bench-big", args.big, args.bulk_fill)
        took = time.perf_counter() - started
        how = "multi-row inserts" if args.bulk_fill else (
            f"transcript.append, {FILL_BATCH:,} per transaction")
        print(f"  filled the big chat ({args.big:,} events) in {took:.1f} s with {how} "
              f"({took / max(1, args.big) * 1e6:.0f} us per event)")
        modes = ("FULL", "NORMAL")
        smalls = {mode: [f"bench-small-{mode.lower()}-{i}" for i in range(SMALL_CHATS)]
                  for mode in modes}
        for key in (k for keys in smalls.values() for k in keys):
            make_chat(db, key, args.small, args.bulk_fill)
        db.close()

        for mode in modes:
            measure(path, mode, smalls[mode], "bench-big", args.ops, args.reads)

        db = Database(f"sqlite:///{path}")
        try:
            show_plans(db, "bench-big")
        finally:
            db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
