"""Transcript append and read cost against the transcript's length, through the store.

Targets (DESIGN.md: "Appending is O(1) whatever the transcript's length"; "Readers take
windows"):
  * appending one message to a chat of 100,000 messages costs <= 1.5x appending to a chat of 100;
  * reading the last 50 messages of that chat costs <= 1.5x the same read on the chat of 100.

Two chats share one SQLite file. Each timed append is its own `db.write()` transaction, so the
figure includes BEGIN IMMEDIATE, the statements and the COMMIT (the WAL fsync with
synchronous=FULL). Each timed read is `transcript.window(conn, key, 50)` inside its own
`db.read()`. Operations alternate between the two chats (ABBA order) so both see the same noise.
Measured with synchronous=FULL (the default) and again with NORMAL for reference.

A benchmark, not a test: it prints figures, ratios and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/append.py [--small 100] [--big 100000] [--ops 1000] [--reads 2000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hearth.store import sessions, transcript  # noqa: E402
from hearth.store.db import Database  # noqa: E402

TARGET_RATIO = 1.5
FILL_BATCH = 10_000
TEXT = (
    "Could you look at the notes I left yesterday about the garden plan and tell me which of "
    "the three layouts keeps the tomatoes in the sun longest? Keep it short."
)


# ----------------------------------------------------------------------------- setup


def make_chat(db: Database, key: str, length: int) -> None:
    """Create a persistent chat and fill it with `length` user events (batched transactions)."""
    with db.write() as conn:
        sessions.insert(conn, key=key, tab_id=uuid.uuid4().hex, memory_mode="persistent",
                        chat_number=None)
    done = 0
    while done < length:
        batch = min(FILL_BATCH, length - done)
        with db.write() as conn:
            for i in range(batch):
                transcript.append(conn, key, "user", {"text": f"{TEXT} #{done + i}"})
        done += batch


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
    op: Callable[[str], None], small: str, big: str, rounds: int
) -> tuple[list[float], list[float]]:
    """Run `op` on each chat `rounds` times in ABBA order; per-call seconds for each chat."""
    times: dict[str, list[float]] = {small: [], big: []}
    for warm in range(20):  # warm caches, compiled-statement cache, connection pool
        op(small if warm % 2 else big)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = (small, big) if r % 2 == 0 else (big, small)
            for key in order:
                start = time.perf_counter()
                op(key)
                times[key].append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times[small], times[big]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(label: str, small: list[float], big: list[float], sizes: tuple[int, int]) -> None:
    s50, b50 = statistics.median(small), statistics.median(big)
    s90, b90 = pct(small, 90), pct(big, 90)
    ratio50, ratio90 = b50 / s50, b90 / s90
    verdict = "MET" if ratio50 <= TARGET_RATIO else "MISSED"
    print(f"  {label}  ({len(small)} per chat)")
    print(f"    chat of {sizes[0]:>7,}: median {s50 * 1e6:8.1f} us   p90 {s90 * 1e6:8.1f} us")
    print(f"    chat of {sizes[1]:>7,}: median {b50 * 1e6:8.1f} us   p90 {b90 * 1e6:8.1f} us")
    print(f"    ratio big/small: median {ratio50:.2f}x  p90 {ratio90:.2f}x   "
          f"target median <= {TARGET_RATIO}x: {verdict}")


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


def measure(url: str, synchronous: str, small: str, big: str, ops: int, reads: int) -> None:
    db = Database(url, synchronous=synchronous)
    try:
        sizes = (length_of(db, small), length_of(db, big))
        print(f"\nsynchronous={synchronous}  (chats of {sizes[0]:,} and {sizes[1]:,} at start)")
        s, b = timed_pairs(lambda key: append_once(db, key), small, big, ops)
        report("append (one db.write() transaction each, commit included)", s, b, sizes)
        s, b = timed_pairs(lambda key: append_once(db, key, idem=True), small, big, ops // 2)
        report("append with an idempotency key (admission's shape)", s, b, sizes)
        s, b = timed_pairs(lambda key: read_once(db, key), small, big, reads)
        report("window(key, 50) read (one db.read() each)", s, b, sizes)
        print(f"    (the small chat grew to {length_of(db, small):,} during the run; both chats "
              "share one table and index, so its depth is set by the total row count)")
    finally:
        db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100, help="length of the small chat")
    parser.add_argument("--big", type=int, default=100_000, help="length of the big chat")
    parser.add_argument("--ops", type=int, default=1000, help="timed appends per chat per mode")
    parser.add_argument("--reads", type=int, default=2000, help="timed reads per chat per mode")
    parser.add_argument("--dir", type=Path, default=None,
                        help="folder for the database (default: a temp folder; fsync cost "
                             "depends on the disk under it)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hearth-bench-", dir=args.dir) as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        print("Hearth bench: transcript append and window read vs transcript length")
        print(f"  SQLite store at {tmp}/bench.db (WAL); targets: big/small <= {TARGET_RATIO}x")
        db = Database(url)
        db.upgrade()
        started = time.perf_counter()
        make_chat(db, "bench-small", args.small)
        make_chat(db, "bench-big", args.big)
        print(f"  filled {args.small + args.big:,} events in {time.perf_counter() - started:.1f} s")
        db.close()

        for synchronous in ("FULL", "NORMAL"):
            measure(url, synchronous, "bench-small", "bench-big", args.ops, args.reads)

        db = Database(url)
        try:
            show_plans(db, "bench-big")
        finally:
            db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
