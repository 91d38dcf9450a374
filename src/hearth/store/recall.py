"""Keyword recall over the memory aggregate: SQLite FTS5 ranked by BM25, over the items
holding one of the message's rarest words (the rule and why: `recall`); on PostgreSQL its
full-text search ranked by ts_rank (`_postgres`). Owns the message's
terms, the document counts kept between calls, the candidate budget and the two queries;
the items themselves are `store.memory`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, text

from hearth.store.memory import Hit, MemoryItem

RECALL_TERMS = 16
STOPWORDS = frozenset(
    "the and for are but not you your with this that have has had was were what when where "
    "which who why how can could would should will shall may might must its it's his her "
    "their they them our ours out from into onto about than then there here also just only "
    "some any all each very more most other such too own same one two does did doing done "
    "been being get got let lets make made like want need please tell know think say said "
    "yes okay ok hi hello thanks thank".split()
)



def message_terms(words: str) -> list[str]:
    """A message's distinct meaningful words, in order: no stopwords, nothing shorter than
    three letters, no bare numbers, at most `RECALL_TERMS`."""
    seen: list[str] = []
    for word in re.findall(r"\w+", words.lower()):
        if len(word) < 3 or word in STOPWORDS or word in seen or word.isdigit():
            continue
        seen.append(word)
        if len(seen) == RECALL_TERMS:
            break
    return seen


def match_expression(words: str) -> str | None:
    """The FTS5 query for a message: its distinct meaningful words, any of them."""
    return _any(message_terms(words)) or None


def _any(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)  # a \w+ word holds no quote to escape


# ----------------------------------------------------------------------------- recall
# The rule is `recall`'s docstring; `plan_recall` applies it to counted words.

CANDIDATE_BUDGET = 1000  # items BM25 ranks, about 3 ms of it, before commoner words only rank
COUNTS_DRIFT = 8  # the kept document counts are dropped once the item count moves by 1/8
COUNTS_KEPT = 10_000  # words whose document count is kept, per database


@dataclass(frozen=True)
class RecallPlan:
    """How a message is recalled: an item must hold one of `candidates` to be ranked, and is
    ranked by BM25 over `ranked_by` (the candidates included). Both in message order."""

    candidates: tuple[str, ...]
    ranked_by: tuple[str, ...]

    @property
    def others(self) -> tuple[str, ...]:
        """The words that rank but do not make an item a candidate."""
        return tuple(t for t in self.ranked_by if t not in self.candidates)


def plan_recall(terms: Sequence[str], docs: Mapping[str, int], items: int,
                budget: int = CANDIDATE_BUDGET) -> RecallPlan:
    """`recall`'s rule for a message's `terms`, given how many of the `items` hold each
    (`docs`): the candidates are the rarest terms while the sum of their counts stays within
    `budget`, the rarest always; the ranking terms are the candidates and every other term
    found in fewer than half the items. Terms found nowhere are left out of both."""
    found = [t for t in terms if docs.get(t, 0) > 0]
    if not found:
        return RecallPlan((), ())
    chosen: set[str] = set()
    total = 0
    for term in sorted(found, key=lambda t: docs[t]):  # rarest first; ties in message order
        if chosen and total + docs[term] > budget:
            break
        chosen.add(term)
        total += docs[term]
    ranked = [t for t in found if t in chosen or 2 * docs[t] < items]
    return RecallPlan(tuple(t for t in found if t in chosen), tuple(ranked))


@dataclass
class _Counts:
    items: int  # how many items there were when the counts were started
    docs: dict[str, int]  # word -> items holding it (as FTS5 matches the quoted word)


# Per database: counting a word costs a pass over its doclist (~0.1-0.5 ms for a common one),
# and the same words come back message after message. A count only chooses which words make
# candidates, so a slightly stale one costs a little speed or a marginal item, never a wrong
# score. Words found nowhere are not kept: an item taught later must be found by them at once.
_COUNTS: WeakKeyDictionary[Engine, _Counts] = WeakKeyDictionary()


def document_counts(conn: Connection, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The number of items, and how many items hold each term."""
    items = indexed_items(conn)
    kept = _COUNTS.get(conn.engine)
    if (kept is None or abs(items - kept.items) * COUNTS_DRIFT > kept.items
            or len(kept.docs) > COUNTS_KEPT):
        kept = _COUNTS[conn.engine] = _Counts(items, {})
    docs = {t: kept.docs[t] for t in terms if t in kept.docs}
    missing = [t for t in terms if t not in docs]
    if missing:
        counted = conn.exec_driver_sql(
            "SELECT " + ", ".join([_COUNT] * len(missing)), tuple(f'"{t}"' for t in missing)
        ).one()
        for term, found in zip(missing, counted, strict=True):
            docs[term] = int(found)
            if found:
                kept.docs[term] = int(found)
    return items, docs


_COUNT = "(SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?)"


def indexed_items(conn: Connection) -> int:
    """How many items the keyword index holds, read as FTS5's BM25 reads it: the first varint
    of its averages record (row 1 of `memory_fts_data`). One row; `count(*)` over memory_items
    reads every page of an index (about 1 ms at 100,000 items once the pages are not cached)."""
    block = conn.exec_driver_sql("SELECT block FROM memory_fts_data WHERE id = 1").scalar()
    return _varint(bytes(block)) if block else 0


def _varint(data: bytes) -> int:
    """SQLite's varint: big-endian groups of 7 bits, the high bit set on all but the last;
    a ninth byte gives all 8 of its bits."""
    value = 0
    for index, byte in enumerate(data[:9]):
        if index == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


# Ranked inside the index first, then joined: the best `limit` rows by BM25 are found over
# memory_fts alone, and only those are looked up in memory_items (joining first looked up
# every matching row before the sort). Ties go to the older item.
_RECALL = text(
    "SELECT m.*, best.score FROM ("
    "SELECT rowid AS id, bm25(memory_fts) AS score FROM memory_fts "
    "WHERE memory_fts MATCH :match ORDER BY score, rowid LIMIT :limit"
    ") AS best JOIN memory_items AS m ON m.id = best.id ORDER BY best.score, m.id"
)

# With words that rank but do not select, two rankings over the candidates: those that also
# hold one of `others` (`:both`, BM25 over every word: their exact score), and all of them
# (`:any`, BM25 over the candidate words only: exact for an item holding none of the others,
# too low for one that does). Keeping each item's better score gives the exact best `limit`:
# an item of the first kind missing from `:both`'s best is beaten there by `limit` items, and
# one of the second kind missing from `:any`'s best is beaten by `limit` items scoring at least
# as well over every word.
_RECALL_SPLIT = text(
    "SELECT m.*, best.score FROM ("
    "SELECT id, min(score) AS score FROM ("
    "SELECT * FROM (SELECT rowid AS id, bm25(memory_fts) AS score FROM memory_fts "
    "WHERE memory_fts MATCH :both ORDER BY score, rowid LIMIT :limit) "
    "UNION ALL "
    "SELECT * FROM (SELECT rowid AS id, bm25(memory_fts) AS score FROM memory_fts "
    "WHERE memory_fts MATCH :any ORDER BY score, rowid LIMIT :limit)"
    ") GROUP BY id ORDER BY score, id LIMIT :limit"
    ") AS best JOIN memory_items AS m ON m.id = best.id ORDER BY best.score, m.id"
)


def recall(conn: Connection, words: str, *, limit: int,
           budget: int = CANDIDATE_BUDGET) -> list[Hit]:
    """The items and passages that best match `words`, best first: of the items holding one
    of the message's rarest words, the best by BM25 over all its words.

    The rule: the message's words (`message_terms`) are counted, each by how many items hold
    it (`document_counts`, kept between calls). The *candidates* are the rarest words, as many
    as keep the sum of their counts within `budget` items, and always the rarest one, so a
    message of common words still recalls. Only an item holding a candidate is ranked, and it
    is ranked by BM25 over the candidates and every other word found in fewer than half the
    items: its exact score over the message (`plan_recall`).

    Why: BM25 costs about 3 us for every item the query matches, and an OR of a message's
    words matches every item holding any of them. A few everyday words, each in 2-3% of a
    memory of 100,000 items, match thousands: tens of ms. The budget bounds that work at
    about 3 ms whatever the size of memory. The words left to ranking alone are the commoner
    ones, the least telling, and they still order the candidates, so the result differs from
    BM25 over every item only where an item sharing none of the rarest words, only commoner
    ones, would have made the list (bench/recall.py measures how often). Below the budget,
    as in any memory of a thousand items or so, nothing is left out and the result is the
    same. Left out at no cost: words no item holds (they match nothing and weigh nothing)
    and, from the ranking, words found in half the items or more: FTS5's BM25 gives those an
    IDF of one millionth, so they only break ties, yet each costs a pass over its doclist.
    """
    terms = message_terms(words)
    if not terms:
        return []
    if conn.dialect.name == "postgresql":
        return _postgres(conn, terms, limit)
    if len(terms) == 1:  # nothing to choose: the one word selects and ranks (no counting)
        plan = RecallPlan(tuple(terms), tuple(terms))
    else:
        items, docs = document_counts(conn, terms)
        plan = plan_recall(terms, docs, items, budget)
        if not plan.candidates:
            return []
    others = plan.others
    if others:
        rows = conn.execute(_RECALL_SPLIT, {
            "both": f"({_any(plan.candidates)}) AND ({_any(others)})",
            "any": _any(plan.candidates), "limit": limit})
    else:
        rows = conn.execute(_RECALL, {"match": _any(plan.candidates), "limit": limit})
    return [Hit(MemoryItem.of(r), float(r._mapping["score"])) for r in rows]


# PostgreSQL (migration 0020): the items whose words (English stemming, as SQLite's porter)
# hold any of the message's, ranked by ts_rank over all of them, best first, ties to the older
# item. A score is the rank negated, so lower is better on both engines.
_POSTGRES = text(
    "SELECT m.*, -ts_rank(to_tsvector('english', m.text), q) AS score "
    "FROM memory_items AS m, to_tsquery('english', :query) AS q "
    "WHERE to_tsvector('english', m.text) @@ q ORDER BY score, m.id LIMIT :limit"
)


def _postgres(conn: Connection, terms: Sequence[str], limit: int) -> list[Hit]:
    query = " | ".join(f"'{t}'" for t in terms)  # a \w+ word holds no quote to escape
    rows = conn.execute(_POSTGRES, {"query": query, "limit": limit})
    return [Hit(MemoryItem.of(r), float(r._mapping["score"])) for r in rows]
