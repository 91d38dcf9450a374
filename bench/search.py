"""Search across chats: query latency over 1,000 chats of 200 messages, and what keeping the
index costs an append.

Targets (issue 15): a search answers in p50 <= 10 ms and p99 <= 50 ms over a varied set of
queries; appending a message with the index kept costs <= 1.3x appending without it.

The store is a temporary SQLite database migrated with `Database.upgrade()` (so the FTS5
index and its triggers are live) and filled in one transaction with multi-row inserts through
the store's schema: `--chats` chats of `--messages` messages each, user messages of 4..40 words
and answers of 20..160, drawn with Zipf weights (exponent 1, as in English) from one ranked
lexicon: the most frequent English words, then everyday content words, then a made-up
vocabulary of `--vocabulary` words (a few with accents). The messages are spread over two years;
some chats are in folders, tagged, pinned, archived; 5% are Incognito or Temporary (never
indexed); 3% of the answers are off the path (earlier variants).

Timed, each inside one open `db.read()` (the statements alone, as the engine's reader runs
them): `store.search.search(conn, query, filters, limit=20)` for `--queries` queries of several
shapes (a rare word, an everyday word, one of the commonest words, two and three words, a
quoted phrase, a prefix, a word in no message, accents folded, each with and without a filter,
the second page), shuffled; p50 / p90 / p99 overall and per shape and filter, in wall-clock
time and in the thread's CPU time (which a busy machine inflates less).

For reference, on the same store: the agent's `chat_search` tool (`memory.chat_search`,
which reads the index too), and the LIKE scan `store.search` uses on a database without FTS5.

Then appends: the database is copied, and the copy loses the index (its triggers and tables
dropped, vacuumed); the sizes of both are printed. A message is appended (`transcript.append`,
each its own `db.write()` transaction, commit included) to chats of each in turn (ABBA
order), with synchronous=FULL (a promise: the owner's message) and NORMAL (bookkeeping: the
turn's answer), and the ratio printed. Last: deleting a chat (its messages, then its row, as
`sessions.forget` does; with the index, its row's deletion merges the index into one segment,
so no byte of the chat's words stays), in each.

A benchmark, not a test: it prints figures, ratios and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/search.py [--chats 1000] [--messages 200] [--queries 400]
        [--appends 400] [--vocabulary 4000] [--dir PATH]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from sqlalchemy import Connection, insert, update  # noqa: E402

from hearth.memory import chat_search  # noqa: E402
from hearth.sessions import forget  # noqa: E402
from hearth.store import (  # noqa: E402
    search,
    sessions as sessions_store,  # noqa: E402
    transcript,
)
from hearth.store.db import Database  # noqa: E402
from hearth.store.schema import sessions, transcript_events  # noqa: E402

TARGET_P50_MS = 10.0
TARGET_P99_MS = 50.0
TARGET_APPEND_RATIO = 1.3
SEED = 20261212
YEAR = 365 * 24 * 3600.0
FUNCTION = (
    "the and to of a in is for that you it with on this my be are have at not but from we "
    "or will can about what an all was they if would your there do so when which more like "
    "one up out time just me"
).split()
EVERYDAY = (
    "work home week day year project meeting plan garden family friend team email call note "
    "list book trip train car dinner coffee morning evening weekend office report budget "
    "doctor school birthday kitchen music movie sister brother mother father deploy server "
    "script database error test release invoice recipe flight hotel always never usually "
    "every first last next new old good best early late"
).split()
ACCENTED = "café résumé naïve crème déjà façade müller señor".split()
ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st tr th".split()
NUCLEI = "a e i o u ai ea io ou ee oo".split()
CODAS = ["", "", "", "n", "r", "s", "l", "t", "m", "nd", "st", "rk"]
FOLDERS = [f"folder-{n}" for n in range(10)]
TAGS = [f"tag{n}" for n in range(12)]


# ----------------------------------------------------------------------------- the store


@dataclass(frozen=True)
class Words:
    lexicon: list[str]
    cumulative: list[float]
    vocabulary: list[str]


def make_words(rng: random.Random, size: int) -> Words:
    made: set[str] = set()
    while len(made) < size:
        word = "".join(rng.choice(ONSETS) + rng.choice(NUCLEI) + rng.choice(CODAS)
                       for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        if len(word) >= 3 and word not in FUNCTION and word not in EVERYDAY:
            made.add(word)
    vocabulary = sorted(made)
    rng.shuffle(vocabulary)
    vocabulary[40:40 + len(ACCENTED)] = ACCENTED  # mid-ranked words with accents
    lexicon = FUNCTION + EVERYDAY + vocabulary
    return Words(lexicon, list(accumulate(1.0 / (rank + 1) for rank in range(len(lexicon)))),
                 vocabulary)


def sentence(rng: random.Random, words: Words, length: int) -> str:
    text = " ".join(rng.choices(words.lexicon, cum_weights=words.cumulative, k=length))
    return text[0].upper() + text[1:] + rng.choice((".", ".", "!", "?"))


def chat_row(rng: random.Random, n: int, start: float) -> dict[str, Any]:
    mode = "persistent" if rng.random() >= 0.05 else rng.choice(("incognito", "temporary"))
    return {"key": f"chat-{n}", "tab_id": uuid.uuid4().hex, "title": f"Chat number {n}",
            "memory_mode": mode, "agent": "default", "origin": "api",
            "folder": rng.choice(FOLDERS) if rng.random() < 0.3 else None,
            "tags": rng.sample(TAGS, rng.choice((0, 0, 1, 2))), "pinned": rng.random() < 0.02,
            "archived": rng.random() < 0.05, "generation": 0, "trust": "ask",
            "chat_number": n, "created_at": start, "updated_at": start}


def build(db: Database, chats: int, messages: int, words: Words, rng: random.Random) -> None:
    """Every chat and message in one transaction, the index's triggers live. The chats take
    turns (message 1 of each, then message 2 of each...), so the messages are inserted in the
    order they were said, as appends are, over the last two years."""
    start = time.time() - 2 * YEAR
    step = 2 * YEAR / (chats * messages)
    rows = [chat_row(rng, n, start) for n in range(1, chats + 1)]
    heads: dict[str, str | None] = {row["key"]: None for row in rows}
    said = 0
    with db.write() as conn:
        conn.execute(insert(sessions), rows)
        for seq in range(1, messages + 1):
            user = seq % 2 == 1
            batch = []
            for row in rows:
                said += 1
                event_id = uuid.uuid4().hex
                length = rng.randint(4, 40) if user else rng.randint(20, 160)
                batch.append({"session_key": row["key"], "seq": seq, "event_id": event_id,
                              "parent_event_id": heads[row["key"]], "idempotency_key": None,
                              "kind": "user" if user else "assistant",
                              "content": {"text": sentence(rng, words, length)}, "meta": {},
                              "source_channel": None, "run_id": None,
                              "created_at": start + said * step,
                              "off_path": not user and rng.random() < 0.03})
                heads[row["key"]] = event_id
            conn.execute(insert(transcript_events), batch)
        for key, head in heads.items():
            conn.execute(update(sessions).where(sessions.c.key == key).values(
                head_event_id=head, last_seq=messages, message_count=messages,
                updated_at=start + said * step))


# ----------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    shape: str  # what the words are
    text: str
    filter: str  # which filter, or "" for none
    filters: search.Filters
    second_page: bool = False  # time the first page and the next one


def queries(rng: random.Random, words: Words, count: int) -> list[Query]:
    """`count` queries: each word shape in turn, one in three with a filter, one in
    seventeen also asking for its second page; shuffled."""
    rare = words.vocabulary[500:]
    mid = words.vocabulary[:200]
    now = time.time()
    shapes: list[tuple[str, Callable[[], str]]] = [
        ("rare word", lambda: rng.choice(rare)),
        ("everyday word", lambda: rng.choice(EVERYDAY)),
        ("commonest word", lambda: rng.choice(FUNCTION[:12])),
        ("two words", lambda: f"{rng.choice(EVERYDAY)} {rng.choice(mid)}"),
        ("three words", lambda: f"{rng.choice(EVERYDAY)} {rng.choice(EVERYDAY)} "
                                f"{rng.choice(mid)}"),
        ("quoted phrase", lambda: f"\"{rng.choice(FUNCTION[:12])} {rng.choice(EVERYDAY)}\""),
        ("prefix", lambda: rng.choice(mid)[:rng.randint(3, 5)] + "*"),
        ("no such word", lambda: f"zzq{rng.randint(0, 99999)}"),
        ("accents folded", lambda: rng.choice(("cafe", "resume", "naive", "deja", "facade"))),
    ]
    filters: list[tuple[str, Callable[[], search.Filters]]] = [
        ("folder", lambda: search.Filters(folder=rng.choice(FOLDERS))),
        ("tag", lambda: search.Filters(tag=rng.choice(TAGS))),
        ("pinned", lambda: search.Filters(pinned=True)),
        ("archived", lambda: search.Filters(archived=True)),
        ("since 6 months", lambda: search.Filters(since=now - YEAR / 2)),
        ("until a year ago", lambda: search.Filters(until=now - YEAR)),
        ("a month a year ago", lambda: search.Filters(since=now - YEAR - 30 * 86400,
                                                      until=now - YEAR)),
    ]
    made = []
    for index in range(count):
        shape, text = shapes[index % len(shapes)]
        name, chosen = ("", search.Filters) if index % 3 else rng.choice(filters)
        made.append(Query(shape, text(), name, chosen(), index % 17 == 0))
    rng.shuffle(made)
    return made


@dataclass
class Timed:
    """Per query shape: wall-clock seconds, and the thread's CPU seconds (which a busy
    machine inflates less)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def time_queries(db: Database, made: Sequence[Query]) -> dict[str, Timed]:
    by_shape: dict[str, Timed] = {}
    with db.read() as conn:
        for query in made[:30]:  # warm the page cache and the statement cache
            run_query(conn, query)
        gc.collect()
        gc.disable()
        try:
            for query in made:
                wall, cpu = time.perf_counter(), time.thread_time()
                run_query(conn, query)
                cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
                names = ["all", query.shape, f"filter: {query.filter or 'none'}"]
                for name in names + (["page 2 too"] if query.second_page else []):
                    timed = by_shape.setdefault(name, Timed())
                    timed.wall.append(wall)
                    timed.cpu.append(cpu)
        finally:
            gc.enable()
    return by_shape


def run_query(conn: Connection, query: Query) -> search.Found:
    found = search.search(conn, query.text, query.filters, limit=20)
    if query.second_page and found.next_cursor:
        found = search.search(conn, query.text, query.filters, limit=20,
                              cursor=found.next_cursor)
    return found


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def report_queries(by_shape: dict[str, Timed]) -> None:
    every = by_shape.pop("all")
    p50, p99 = pct(every.wall, 50) * 1e3, pct(every.wall, 99) * 1e3
    print(f"\nsearch ({len(every.wall)} queries, limit 20), ms: p50 {p50:.2f}  p90 "
          f"{pct(every.wall, 90) * 1e3:.2f}  p99 {p99:.2f}  max {max(every.wall) * 1e3:.2f}"
          f"   (CPU: p50 {pct(every.cpu, 50) * 1e3:.2f}  p99 {pct(every.cpu, 99) * 1e3:.2f})")
    print(f"  targets p50 <= {TARGET_P50_MS:g} ms: {verdict(p50 <= TARGET_P50_MS)}"
          f"   p99 <= {TARGET_P99_MS:g} ms: {verdict(p99 <= TARGET_P99_MS)}")
    print("  by shape, ms:                      wall p50     p99    CPU p50     p99")
    for shape, timed in sorted(by_shape.items()):
        print(f"    {shape:<26} n={len(timed.wall):>3} {pct(timed.wall, 50) * 1e3:7.2f} "
              f"{pct(timed.wall, 99) * 1e3:7.2f}   {pct(timed.cpu, 50) * 1e3:7.2f} "
              f"{pct(timed.cpu, 99) * 1e3:7.2f}")


def verdict(met: bool) -> str:
    return "MET" if met else "MISSED"




# ----------------------------------------------------------------------------- appends

ANSWER = ("Plant the runner beans along the south fence once the soil is warm, water them "
          "deeply twice a week, and pinch out the tips when they reach the top of the canes; "
          "the tomatoes can go beside them, where the afternoon sun stays longest.")


def without_index(path: Path) -> None:
    """The same store without the search index: its triggers and tables dropped, vacuumed."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        names = [row[0] for row in raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chat_search%'")]
        for name in names:
            raw.execute(f"DROP TRIGGER {name}")
        raw.execute("DROP TABLE chat_search")
        raw.execute("DROP VIEW chat_search_text")
        raw.execute("DROP TABLE chat_search_messages")
        raw.execute("VACUUM")
    finally:
        raw.close()


def kept_chats(db: Database, count: int) -> list[str]:
    with db.read() as conn:
        return list(conn.exec_driver_sql(
            "SELECT key FROM sessions WHERE memory_mode = 'persistent' ORDER BY key LIMIT ?",
            (count,)).scalars())


def time_appends(paths: dict[str, Path], synchronous: str, rounds: int) -> dict[str, list[float]]:
    """Appends to both stores in turn (ABBA), each its own transaction, commit included."""
    dbs = {name: Database(f"sqlite:///{path}", synchronous=synchronous)
           for name, path in paths.items()}
    chats = {name: kept_chats(db, 50) for name, db in dbs.items()}
    times: dict[str, list[float]] = {name: [] for name in dbs}

    def append(name: str, n: int) -> float:
        started = time.perf_counter()
        with dbs[name].write() as conn:
            transcript.append(conn, chats[name][n % 50], "assistant", {"text": ANSWER})
        return time.perf_counter() - started

    try:
        for n in range(20):
            for name in dbs:
                append(name, n)
        gc.collect()
        gc.disable()
        names = list(dbs)
        for n in range(rounds):
            for name in names if n % 2 == 0 else reversed(names):
                times[name].append(append(name, n))
    finally:
        gc.enable()
        for db in dbs.values():
            db.close()
    return times


def report_appends(paths: dict[str, Path], rounds: int) -> None:
    for synchronous, what in (("FULL", "a promise, like the owner's message"),
                              ("NORMAL", "bookkeeping, like the turn's answer")):
        times = time_appends(paths, synchronous, rounds)
        kept, plain = statistics.median(times["indexed"]), statistics.median(times["plain"])
        ratio = kept / plain
        print(f"\nappend, synchronous={synchronous} ({what}; {rounds} each, median):")
        for name, label in (("plain", "without the index"), ("indexed", "with the index")):
            print(f"    {label:<18} {statistics.median(times[name]) * 1e3:7.3f} ms   "
                  f"p90 {pct(times[name], 90) * 1e3:7.3f} ms")
        print(f"    ratio {ratio:.2f}x   target <= {TARGET_APPEND_RATIO}x: "
              f"{verdict(ratio <= TARGET_APPEND_RATIO)}")


# ----------------------------------------------------------------------------- reference


def time_deletions(paths: dict[str, Path], count: int) -> None:
    """A chat's purge (its messages, then its row), as deleting it does, in each store."""
    print(f"\ndeleting a chat of its messages and row ({count} chats each, median):")
    for name, path in paths.items():
        db = Database(f"sqlite:///{path}")
        took = []
        with tempfile.TemporaryDirectory() as folders:
            for key in kept_chats(db, count):
                with db.read() as conn:
                    row = sessions_store.get(conn, key)
                assert row is not None
                started = time.perf_counter()
                done = forget.purge(db, row, Path(folders))
                took.append(time.perf_counter() - started)
                assert done.row_removed, done.failures
        db.close()
        print(f"    {name:<8} {statistics.median(took) * 1e3:8.1f} ms   max {max(took) * 1e3:8.1f}")


def time_reference(db: Database, words: Sequence[str]) -> None:
    """The agent's chat_search tool (memory.chat_search, on the index), and the LIKE scan
    `store.search` falls back to on a database without FTS5, run here on the same store."""
    for label, run in (
            ("the agent's chat_search tool (the index)",
             lambda q: chat_search.search_chats(db, q, exclude_key=None)),
            ("the LIKE scan of a database without FTS5",
             lambda q: _scan(db, q))):
        took = []
        for query in words:
            started = time.perf_counter()
            run(query)
            took.append(time.perf_counter() - started)
        print(f"  {label}: p50 {pct(took, 50) * 1e3:.1f} ms, max {max(took) * 1e3:.1f} ms "
              f"({len(took)} everyday words)")


def _scan(db: Database, query: str) -> search.Found:
    with db.read() as conn:
        return search.scan(conn, query, search.Filters(), limit=20)


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=200, help="messages per chat")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--appends", type=int, default=400, help="timed appends per store")
    parser.add_argument("--vocabulary", type=int, default=4000)
    parser.add_argument("--dir", type=Path, default=None,
                        help="folder for the databases (default: a temp folder)")
    args = parser.parse_args()
    rng = random.Random(SEED)
    words = make_words(rng, args.vocabulary)
    print("Hearth bench: search across chats")
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory(prefix="hearth-bench-", dir=args.dir) as tmp:
        indexed, plain = Path(tmp) / "indexed.db", Path(tmp) / "plain.db"
        db = Database(f"sqlite:///{indexed}")
        db.upgrade()
        started = time.perf_counter()
        build(db, args.chats, args.messages, words, rng)
        print(f"  built {args.chats:,} chats x {args.messages} messages in "
              f"{time.perf_counter() - started:.0f} s (one transaction, the index's triggers "
              "live)")
        made = queries(random.Random(SEED + 1), words, args.queries)
        report_queries(time_queries(db, made))
        print("\nfor reference, on the same store:")
        time_reference(db, [q.text for q in made if q.shape == "everyday word"][:10])
        db.close()
        shutil.copyfile(indexed, plain)
        without_index(plain)
        print(f"\n  the store: {size_mb(indexed):.0f} MB with the index, {size_mb(plain):.0f} MB "
              "without it")
        paths = {"indexed": indexed, "plain": plain}
        report_appends(paths, args.appends)
        time_deletions(paths, 5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
