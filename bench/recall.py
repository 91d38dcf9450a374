"""Keyword recall latency against the size of memory, through the store and the service,
and how much recall's candidate rule changes what it finds.

Target: recall over a memory of 100,000 items answers in p50 <= 5 ms (`store.recall.recall`
on a read connection). The same is measured on 1,000 items, and the big/small ratio printed.

Each store is a temporary SQLite database migrated with `Database.upgrade()` and filled with
generated items: sentences of 6..24 words drawn with Zipf weights (exponent 1, as in English)
from one ranked lexicon: the most frequent English words first (most of them stopwords), then
everyday content words (owner, week, garden, prefers...: each in 2-3% of items), then a
made-up vocabulary of a few thousand words (most in a few dozen items). The queries are
messages of several shapes (short, medium, long enough to reach `RECALL_TERMS`, rare words
only, common words only, words memory has never seen), shuffled. Timed:

  * `store.recall.recall(conn, message, limit=5)` inside one open `db.read()` (the query alone):
    BM25 over all the message's words, of the items holding one of its rarest words, within
    `CANDIDATE_BUDGET` items (the rule: `store.recall.recall`'s docstring). It is the first
    recall on each store, so the words' document counts are kept only from the 30 untimed
    queries on: counting each word at its first sight is inside the figures;
  * before, for comparison: the recall this replaced, the OR of all the message's words ranked
    by BM25 over every item it matches (`recall_before`), on the same connection;
  * the rule again with the words' document counts taken afresh for every query (the kept
    counts dropped first): what a message costs when memory has just changed a lot or all its
    words are new;
  * `Memory.recall(message)` as the gateway's own work: its `db.read()`, the query, and the
    `db.write(durable=False)` that marks the hits recalled.

Each reports p50 / p90 / p99 in ms, per store size, with the ratio; for the first two, the
thread's CPU time too (p50 / p99 at 100,000 items), which a busy machine inflates less than the
wall time. Then how the results differ from before, over the same queries: the share of top-5
lists that differ (in order, and as sets) and of top-1s that differ, per store. For reference,
without a target: BM25 over the OR of all the words straight through sqlite3 (no join, no rows
built) and that OR's matching alone (a count of the matches): the gap between the two is what
BM25 costs, about 3 us for every item matched. Then per query shape on the big store: p50 /
p99 after and p50 before, words, candidate words, hits, and changed lists; the number of items
each query ranks before and after; and last `EXPLAIN QUERY PLAN` of the recall statement used
when some words only rank.

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

from sqlalchemy import Connection, text  # noqa: E402

from hearth.memory.service import Memory  # noqa: E402
from hearth.store import memory as store, recall as recall_store  # noqa: E402
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


def timed(op: Callable[[str], object], messages: Sequence[str], warm: int = 30,
          cpu: list[float] | None = None) -> list[float]:
    """Wall time of `op` for each message (after `warm` untimed ones); the thread's CPU time
    of each is appended to `cpu` if given (a busy machine inflates it less)."""
    for message in messages[:warm]:
        op(message)
    times = []
    gc.collect()
    gc.disable()
    try:
        for message in messages:
            start, ran = time.perf_counter(), time.thread_time()
            op(message)
            times.append(time.perf_counter() - start)
            if cpu is not None:
                cpu.append(time.thread_time() - ran)
    finally:
        gc.enable()
    return times


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# The recall the candidate rule replaced, verbatim: the OR of every word, BM25 over every match.
BEFORE = text(
    "SELECT m.*, best.score FROM ("
    "SELECT rowid, bm25(memory_fts) AS score FROM memory_fts "
    "WHERE memory_fts MATCH :match ORDER BY score LIMIT :limit"
    ") AS best JOIN memory_items AS m ON m.id = best.rowid ORDER BY best.score"
)


def recall_before(conn: Connection, message: str, limit: int) -> list[store.Hit]:
    expression = recall_store.match_expression(message)
    if expression is None:
        return []
    rows = conn.execute(BEFORE, {"match": expression, "limit": limit})
    return [store.Hit(store.MemoryItem.of(r), float(r._mapping["score"])) for r in rows]


def recall_afresh(conn: Connection, message: str, limit: int) -> list[store.Hit]:
    recall_store._COUNTS.pop(conn.engine, None)  # every word counted again, as at first sight
    return recall_store.recall(conn, message, limit=limit)


def store_recall_times(db: Database, messages: Sequence[str],
                       op: Callable[[Connection, str, int], object] | None = None,
                       cpu: list[float] | None = None) -> list[float]:
    recall = op or (lambda conn, m, limit: recall_store.recall(conn, m, limit=limit))
    with db.read() as conn:
        return timed(lambda m: recall(conn, m, LIMIT), messages, cpu=cpu)


def service_recall_times(memory: Memory, messages: Sequence[str]) -> list[float]:
    return timed(lambda m: memory.recall(m, limit=LIMIT), messages)


SCORING = ("SELECT rowid, bm25(memory_fts) AS score FROM memory_fts WHERE memory_fts MATCH ? "
           "ORDER BY score LIMIT ?")
MATCHING = "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ? AND ? > 0"


def raw_times(db: Database, statement: str, messages: Sequence[str]) -> list[float]:
    """`statement` straight through sqlite3 with each message's OR of all its words (no
    SQLAlchemy, no rows built): what SQLite itself spends."""
    expressions = [recall_store.match_expression(m) or '"zzzznothing"' for m in messages]
    with db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        return timed(lambda e: raw.execute(statement, (e, LIMIT)).fetchall(), expressions)


@dataclass(frozen=True)
class Change:
    """How recall's results differ from before's, per query."""

    lists: list[bool]  # the top-5 differs (ids in order)
    sets: list[bool]  # the top-5 differs as a set
    firsts: list[bool]  # the top-1 differs

    @staticmethod
    def share(flags: Sequence[bool]) -> str:
        return f"{sum(flags) / max(1, len(flags)):6.1%}"


def changes(db: Database, messages: Sequence[str]) -> Change:
    lists, sets, firsts = [], [], []
    with db.read() as conn:
        for message in messages:
            before = [h.item.id for h in recall_before(conn, message, LIMIT)]
            after = [h.item.id for h in recall_store.recall(conn, message, limit=LIMIT)]
            lists.append(before != after)
            sets.append(set(before) != set(after))
            firsts.append(before[:1] != after[:1])
    return Change(lists, sets, firsts)


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


def report_change(label: str, change: Change) -> None:
    print(f"    {label}: top-5 list differs {Change.share(change.lists)} "
          f"(as a set {Change.share(change.sets)}), top-1 differs "
          f"{Change.share(change.firsts)}   ({len(change.lists)} queries)")


def plans(conn: Connection, messages: Sequence[str]) -> list[recall_store.RecallPlan]:
    made = []
    for message in messages:
        terms = recall_store.message_terms(message)
        items, docs = recall_store.document_counts(conn, terms) if terms else (0, {})
        made.append(recall_store.plan_recall(terms, docs, items))
    return made


def by_shape(db: Database, asked: Sequence[tuple[str, str]], change: Change) -> None:
    print("  on the big store, by query shape: p50 / p99 ms after, p50 before; words (found in "
          "some item), candidate words, hits; top-5 lists / top-1s that differ from before")
    with db.read() as conn:
        for shape in SHAPES:
            picked = [i for i, (s, _m) in enumerate(asked) if s == shape]
            messages = [asked[i][1] for i in picked]
            after = timed(lambda m: recall_store.recall(conn, m, limit=LIMIT), messages, warm=5)
            before = timed(lambda m: recall_before(conn, m, LIMIT), messages, warm=5)
            made = plans(conn, messages)
            terms = [len(recall_store.message_terms(m)) for m in messages]
            found = [len(p.ranked_by) for p in made]
            chosen = [len(p.candidates) for p in made]
            hits = [len(recall_store.recall(conn, m, limit=LIMIT)) for m in messages]
            lists = sum(change.lists[i] for i in picked)
            firsts = sum(change.firsts[i] for i in picked)
            print(f"    {shape:>8}: p50 {statistics.median(after) * 1e3:6.2f}  "
                  f"p99 {pct(after, 99) * 1e3:6.2f}  before {statistics.median(before) * 1e3:6.2f}"
                  f"   words {statistics.mean(terms):4.1f} ({statistics.mean(found):4.1f})  "
                  f"candidates {statistics.mean(chosen):3.1f}  hits {statistics.mean(hits):3.1f}"
                  f"   differ {lists:2}/{firsts:2} of {len(messages)}")


def matched_rows(db: Database, asked: Sequence[tuple[str, str]]) -> None:
    """How many items each query ranks: before, every item the OR of its words matches; now,
    the items holding a candidate word."""
    count = "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?"
    with db.read() as conn:
        before, after = [], []
        made = plans(conn, [m for _s, m in asked])
        for (_shape, message), plan in zip(asked, made, strict=True):
            expression = recall_store.match_expression(message)
            before.append(int(conn.exec_driver_sql(count, (expression,)).scalar_one())
                          if expression else 0)
            after.append(int(conn.exec_driver_sql(
                count, (" OR ".join(f'"{t}"' for t in plan.candidates),)).scalar_one())
                if plan.candidates else 0)
    for label, counts in (("before (the OR of all words)", before),
                          ("now (items holding a candidate word)", after)):
        print(f"  items ranked per query on the big store, {label}: "
              f"p50 {statistics.median(counts):,.0f}  p90 {pct(counts, 90):,.0f}  "
              f"max {max(counts):,}")


def explain(db: Database) -> None:
    statement = str(recall_store._RECALL_SPLIT)  # the statement exactly as recall sends it
    print(f"\nEXPLAIN QUERY PLAN of the recall statement when some words only rank\n"
          f"    {statement}")
    with db.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        sql = (statement.replace(":both", "?1").replace(":any", "?2")
               .replace(":limit", "?3"))
        plan = raw.execute(f"EXPLAIN QUERY PLAN {sql}", ('("a") AND ("b")', '"a"', LIMIT))
        for row in plan.fetchall():
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
          f"{len(messages)} queries; RECALL_TERMS {recall_store.RECALL_TERMS}; "
          f"CANDIDATE_BUDGET {recall_store.CANDIDATE_BUDGET:,}; limit {LIMIT}")
    with tempfile.TemporaryDirectory(prefix="hearth-bench-", dir=args.dir) as tmp:
        folder = Path(tmp)
        small_db, small_memory = build(folder, "small", args.small, words, random.Random(SEED),
                                        args.optimize)
        big_db, big_memory = build(folder, "big", args.big, words, random.Random(SEED),
                                    args.optimize)
        try:
            sizes = (args.small, args.big)
            print()
            cpu_after: list[float] = []
            cpu_before: list[float] = []
            after = store_recall_times(big_db, messages, cpu=cpu_after)
            report("store.recall.recall (one open read connection; the query alone)",
                   store_recall_times(small_db, messages), after, sizes, target=True)
            before = store_recall_times(big_db, messages, recall_before, cpu=cpu_before)
            report("before: the OR of all the words, BM25 over every match (same connection)",
                   store_recall_times(small_db, messages, recall_before), before, sizes,
                   target=True)
            print(f"    at {sizes[1]:,} items, after/before: p50 "
                  f"{statistics.median(after) / statistics.median(before):.2f}x  "
                  f"p99 {pct(after, 99) / pct(before, 99):.2f}x;  the thread's CPU time, "
                  f"p50 / p99: after {statistics.median(cpu_after) * 1e3:.2f} / "
                  f"{pct(cpu_after, 99) * 1e3:.2f} ms, before "
                  f"{statistics.median(cpu_before) * 1e3:.2f} / {pct(cpu_before, 99) * 1e3:.2f} ms")
            report("store.recall.recall with every word counted afresh (no kept counts)",
                   store_recall_times(small_db, messages, recall_afresh),
                   store_recall_times(big_db, messages, recall_afresh), sizes, target=False)
            report("Memory.recall (read, query, and marking the hits recalled)",
                   service_recall_times(small_memory, messages),
                   service_recall_times(big_memory, messages), sizes, target=False)
            report("reference: BM25 over the OR of all the words alone, straight through sqlite3",
                   raw_times(small_db, SCORING, messages), raw_times(big_db, SCORING, messages),
                   sizes, target=False)
            report("reference: matching that OR alone (count the matches, no ranking)",
                   raw_times(small_db, MATCHING, messages),
                   raw_times(big_db, MATCHING, messages), sizes, target=False)
            print("\n  how the results differ from before (same queries, limit 5)")
            report_change(f"{sizes[0]:>7,} items", changes(small_db, messages))
            change = changes(big_db, messages)
            report_change(f"{sizes[1]:>7,} items", change)
            print()
            by_shape(big_db, asked, change)
            matched_rows(big_db, asked)
            explain(big_db)
            print(f"\n  load average {os.getloadavg()[0]:.2f} at the end")
        finally:
            small_db.close()
            big_db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
