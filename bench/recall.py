"""Keyword recall latency against the size of memory, through the store and the service.

Target: recall over a memory of 100,000 items answers in p50 <= 5 ms (`store.memory.recall`
on a read connection). The same is measured on 1,000 items, and the big/small ratio printed.

Each store is a temporary SQLite database migrated with `Database.upgrade()` and filled with
generated items: sentences of 6..24 words drawn with Zipf weights (exponent 1, as in English)
from one ranked lexicon: the most frequent English words first (most of them stopwords), then
everyday content words (owner, week, garden, prefers...: each in 2-3% of items), then a
made-up vocabulary of a few thousand words (most in a few dozen items). The queries are
messages of several shapes (short, medium, long enough to reach `RECALL_TERMS`, rare words
only, common words only, words memory has never seen), shuffled. Timed:

  * `store.memory.recall(conn, message, limit=5)` inside one open `db.read()` (the query alone);
  * `Memory.recall(message)` as the gateway's own work: its `db.read()`, the query, and the
    `db.write(durable=False)` that marks the hits recalled.

Each reports p50 / p90 / p99 in ms, per store size, with the ratio. For reference, without a
target: the ranking statement alone straight through sqlite3 (BM25 over `memory_fts`, no join,
no rows built) and the matching alone (a count of the matches): the gap between the two is what
BM25 costs, about 3 us for every item the OR of the message's words matches. Then the p50 per
query shape and the number of items matched per query on the big store, and last
`EXPLAIN QUERY PLAN` of the recall statement.

A benchmark, not a test: it prints figures, ratios and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/recall.py [--small 1000] [--big 100000] [--queries 400]
        [--vocabulary 4000] [--zipf 1.0] [--optimize] [--dir PATH]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hearth.memory.service import Memory  # noqa: E402
from hearth.store import memory as store  # noqa: E402
from hearth.store.db import Database, now  # noqa: E402
from hearth.store.schema import memory_items  # noqa: E402

TARGET_P50_MS = 5.0
LIMIT = 5
FILL_BATCH = 10_000
SEED = 20261130
VOCABULARY = 4000
ZIPF = 1.0  # rank-frequency exponent of the whole lexicon (English is close to 1)
FUNCTION = (  # the head of the lexicon: the most frequent English words, most of them stopwords
    "the and to of a in is for that you it with on this my be are have at not but from we "
    "or will can about what an all was they if would your there do so when which more like "
    "one up out time just me"
).split()
EVERYDAY = (  # then frequent content words, the kind a personal memory is full of
    "owner work home week day year project meeting plan garden family friend team email "
    "call note list book trip train car dinner coffee morning evening weekend office report "
    "budget doctor school birthday kitchen music movie sister brother mother father daughter "
    "son partner always never usually prefers likes wants needs keeps uses reads writes "
    "every first last next new old good best early late"
).split()
ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st tr th".split()
NUCLEI = "a e i o u ai ea io ou ee oo".split()
CODAS = ["", "", "", "n", "r", "s", "l", "t", "m", "nd", "st", "rk"]


# ----------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class Words:
    """The lexicon, ranked: the function words, the everyday words, then the made-up
    vocabulary; drawn with Zipf weights over the rank (`cumulative`)."""

    lexicon: list[str]
    cumulative: list[float]
    vocabulary: list[str]


def make_words(rng: random.Random, size: int, zipf: float = ZIPF) -> Words:
    made: set[str] = set()
    while len(made) < size:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        word = "".join(rng.choice(ONSETS) + rng.choice(NUCLEI) + rng.choice(CODAS)
                       for _ in range(syllables))
        if len(word) >= 3 and word not in FUNCTION and word not in EVERYDAY:
            made.add(word)
    vocabulary = sorted(made)
    rng.shuffle(vocabulary)  # rank order unrelated to spelling
    lexicon = FUNCTION + EVERYDAY + vocabulary
    weights = (1.0 / (rank + 1) ** zipf for rank in range(len(lexicon)))
    return Words(lexicon, list(accumulate(weights)), vocabulary)


def sentence(rng: random.Random, words: Words, length: int) -> str:
    picked = rng.choices(words.lexicon, cum_weights=words.cumulative, k=length)
    text = " ".join(picked)
    return text[0].upper() + text[1:] + rng.choice((".", ".", ".", "!", "?"))


def fill(db: Database, count: int, words: Words, rng: random.Random) -> float:
    """Insert `count` items many per statement (the FTS index kept by its triggers)."""
    started = time.perf_counter()
    done = 0
    while done < count:
        rows = []
        for index in range(done, min(count, done + FILL_BATCH)):
            text = sentence(rng, words, rng.randint(6, 24))
            stamp = now()
            rows.append({"kind": store.KINDS[index % len(store.KINDS)], "text": text,
                         "fingerprint": store.fingerprint(f"{text} {index}"), "source": None,
                         "written_by": "bench", "filed_under": None, "created_at": stamp,
                         "updated_at": stamp})
        with db.write(durable=False) as conn:
            conn.execute(memory_items.insert(), rows)
        done += len(rows)
    return time.perf_counter() - started


SHAPES = ("short", "medium", "long", "rare", "common", "unknown")


def queries(rng: random.Random, words: Words, count: int) -> list[tuple[str, str]]:
    """(shape, message) pairs, the shapes in turn, shuffled."""
    tail = words.vocabulary[len(words.vocabulary) // 2:]
    made: list[tuple[str, str]] = []
    for index in range(count):
        shape = SHAPES[index % len(SHAPES)]
        if shape == "short":
            text = sentence(rng, words, rng.randint(2, 5))
        elif shape == "medium":
            text = sentence(rng, words, rng.randint(8, 20))
        elif shape == "long":
            text = " ".join(sentence(rng, words, rng.randint(10, 20)) for _ in range(4))
        elif shape == "rare":
            text = " ".join(rng.sample(tail, rng.randint(1, 4)))
        elif shape == "common":
            text = " ".join(rng.choices(FUNCTION + EVERYDAY, k=rng.randint(4, 10)))
        else:
            text = " ".join(f"zq{rng.randrange(10**6)}x" for _ in range(rng.randint(1, 4)))
        made.append((shape, text))
    rng.shuffle(made)
    return made


# ----------------------------------------------------------------------------- timing


def timed(op: Callable[[str], object], messages: Sequence[str], warm: int = 30) -> list[float]:
    for message in messages[:warm]:
        op(message)
    times = []
    gc.collect()
    gc.disable()
    try:
        for message in messages:
            start = time.perf_counter()
            op(message)
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def store_recall_times(db: Database, messages: Sequence[str]) -> list[float]:
    with db.read() as conn:
        return timed(lambda m: store.recall(conn, m, limit=LIMIT), messages)


def service_recall_times(memory: Memory, messages: Sequence[str]) -> list[float]:
    return timed(lambda m: memory.recall(m, limit=LIMIT), messages)


SCORING = ("SELECT rowid, bm25(memory_fts) AS score FROM memory_fts WHERE memory_fts MATCH ? "
           "ORDER BY score LIMIT ?")
MATCHING = "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ? AND ? > 0"


def raw_times(db: Database, statement: str, messages: Sequence[str]) -> list[float]:
    """`statement` straight through sqlite3 with each message's match expression (no
    SQLAlchemy, no rows built): what SQLite itself spends."""
    expressions = [store.match_expression(m) or '"zzzznothing"' for m in messages]
    with db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        return timed(lambda e: raw.execute(statement, (e, LIMIT)).fetchall(), expressions)


def line(label: str, times: Sequence[float]) -> str:
    return (f"{label}: p50 {statistics.median(times) * 1e3:7.2f} ms   "
            f"p90 {pct(times, 90) * 1e3:7.2f} ms   p99 {pct(times, 99) * 1e3:7.2f} ms")


def report(label: str, small: Sequence[float], big: Sequence[float], sizes: tuple[int, int],
           target: bool) -> None:
    b50 = statistics.median(big)
    print(f"  {label}  ({len(big)} queries per store)")
    print(f"    {line(f'{sizes[0]:>7,} items', small)}")
    print(f"    {line(f'{sizes[1]:>7,} items', big)}")
    ratio50 = b50 / statistics.median(small)
    ratio99 = pct(big, 99) / pct(small, 99)
    verdict = ""
    if target:
        met = "MET" if b50 * 1e3 <= TARGET_P50_MS else "MISSED"
        verdict = f"   target p50 <= {TARGET_P50_MS:g} ms at {sizes[1]:,}: {met}"
    print(f"    ratio big/small: p50 {ratio50:.2f}x  p99 {ratio99:.2f}x{verdict}")


def by_shape(db: Database, asked: Sequence[tuple[str, str]]) -> None:
    print("  store.memory.recall on the big store, by query shape (p50 / p99 ms, terms, hits):")
    with db.read() as conn:
        for shape in SHAPES:
            messages = [m for s, m in asked if s == shape]
            times = timed(lambda m: store.recall(conn, m, limit=LIMIT), messages, warm=5)
            expressions = [store.match_expression(m) for m in messages]
            terms = [len(e.split(" OR ")) if e else 0 for e in expressions]
            hits = [len(store.recall(conn, m, limit=LIMIT)) for m in messages]
            print(f"    {shape:>8}: p50 {statistics.median(times) * 1e3:7.2f}  "
                  f"p99 {pct(times, 99) * 1e3:7.2f}   terms {statistics.mean(terms):4.1f}   "
                  f"hits {statistics.mean(hits):3.1f}   ({len(messages)} queries)")


def matched_rows(db: Database, asked: Sequence[tuple[str, str]]) -> None:
    """How many items each query's OR-expression matches: what BM25 ranks before LIMIT."""
    with db.read() as conn:
        counts = []
        for _shape, message in asked:
            expression = store.match_expression(message)
            if expression is None:
                counts.append(0)
                continue
            counts.append(int(conn.exec_driver_sql(
                "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?",
                (expression,)).scalar_one()))
    print(f"  items matched per query on the big store (ranked before LIMIT {LIMIT}): "
          f"p50 {statistics.median(counts):,.0f}  p90 {pct(counts, 90):,.0f}  "
          f"max {max(counts):,}")


def explain(db: Database, message: str) -> None:
    expression = store.match_expression(message)
    statement = str(store._RECALL)  # the statement exactly as recall sends it
    print(f"\nEXPLAIN QUERY PLAN of the recall statement\n    {statement}")
    with db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        sql = statement.replace(":match", "?").replace(":limit", "?")
        for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", (expression, LIMIT)).fetchall():
            print(f"      -> {row[3]}")


# ----------------------------------------------------------------------------- main


def build(folder: Path, name: str, count: int, words: Words, rng: random.Random,
          optimize: bool) -> tuple[Database, Memory]:
    db = Database(f"sqlite:///{folder / f'{name}.db'}")
    db.upgrade()
    took = fill(db, count, words, rng)
    if optimize:
        with db.write(durable=False) as conn:
            conn.exec_driver_sql("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
    size = os.path.getsize(folder / f"{name}.db") / 1e6
    print(f"  filled {count:,} items in {took:.1f} s ({size:,.1f} MB before the WAL is "
          f"checkpointed)")
    return db, Memory(db, folder / f"{name}-memory")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1000, help="items in the small store")
    parser.add_argument("--big", type=int, default=100_000, help="items in the big store")
    parser.add_argument("--queries", type=int, default=400, help="timed queries per store")
    parser.add_argument("--vocabulary", type=int, default=VOCABULARY,
                        help="made-up words to draw from")
    parser.add_argument("--zipf", type=float, default=ZIPF,
                        help="rank-frequency exponent of the lexicon")
    parser.add_argument("--optimize", action="store_true",
                        help="merge the FTS index into one segment after filling (a store "
                             "grown item by item keeps several)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="folder for the databases (default: a temp folder)")
    args = parser.parse_args()

    rng = random.Random(SEED)
    words = make_words(rng, args.vocabulary, args.zipf)
    asked = queries(random.Random(SEED + 1), words, args.queries)
    messages = [m for _shape, m in asked]

    print("Hearth bench: keyword recall (FTS5, BM25) vs the number of memory items")
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"  lexicon: {len(FUNCTION)} function + {len(EVERYDAY)} everyday + "
          f"{len(words.vocabulary):,} made-up words, Zipf {args.zipf:g}; "
          f"{len(messages)} queries; RECALL_TERMS {store.RECALL_TERMS}; limit {LIMIT}")
    with tempfile.TemporaryDirectory(prefix="hearth-bench-", dir=args.dir) as tmp:
        folder = Path(tmp)
        small_db, small_memory = build(folder, "small", args.small, words, random.Random(SEED),
                                        args.optimize)
        big_db, big_memory = build(folder, "big", args.big, words, random.Random(SEED),
                                    args.optimize)
        try:
            sizes = (args.small, args.big)
            print()
            report("store.memory.recall (one open read connection; the query alone)",
                   store_recall_times(small_db, messages), store_recall_times(big_db, messages),
                   sizes, target=True)
            report("Memory.recall (read, query, and marking the hits recalled)",
                   service_recall_times(small_memory, messages),
                   service_recall_times(big_memory, messages), sizes, target=False)
            report("reference: BM25 ranking over memory_fts alone, straight through sqlite3",
                   raw_times(small_db, SCORING, messages), raw_times(big_db, SCORING, messages),
                   sizes, target=False)
            report("reference: matching alone (count the matches, no ranking)",
                   raw_times(small_db, MATCHING, messages),
                   raw_times(big_db, MATCHING, messages), sizes, target=False)
            print()
            by_shape(big_db, asked)
            matched_rows(big_db, asked)
            explain(big_db, messages[0])
        finally:
            small_db.close()
            big_db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
