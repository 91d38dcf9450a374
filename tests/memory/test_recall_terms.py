"""Which words recall ranks by (`store.memory.recall`'s rule): the candidates are the items
holding one of the message's rarest words, within a budget of items, and they are ranked by
BM25 over all its words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete

from hearth.store import memory as store, recall as recall_store
from hearth.store.db import Database, now
from hearth.store.schema import memory_items
from tests.support.store import migrated_store

FILLER = 1200  # items, more than CANDIDATE_BUDGET, so the budget bites
GARDEN = 1100  # of them hold "garden": most items, and more than the budget
WEEK = 100  # of them hold "week"


def _rows(texts: list[str]) -> list[dict[str, object]]:
    stamp = now()
    return [{"kind": "fact", "text": t, "fingerprint": store.fingerprint(f"{t} {i}"),
             "source": None, "written_by": "test", "filed_under": None, "created_at": stamp,
             "updated_at": stamp} for i, t in enumerate(texts)]


def _filler() -> list[str]:
    texts = []
    for index in range(FILLER):
        words = [f"note{index % 37}x", "about"]
        if index < GARDEN:
            words.append("garden")
        if index % (FILLER // WEEK) == 0:
            words.append("week")
        texts.append(" ".join(words))
    return texts


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated store holding the filler items (not the folder's protected one)."""
    with migrated_store(tmp_path, "hearth.db") as database:
        with database.write() as conn:
            conn.execute(memory_items.insert(), _rows(_filler()))
        yield database


def _add(db: Database, *texts: str) -> list[int]:
    with db.write() as conn:
        conn.execute(memory_items.insert(), _rows(list(texts)))
        rows = conn.execute(memory_items.select().order_by(memory_items.c.id.desc())
                            .limit(len(texts))).all()
    return [r.id for r in reversed(rows)]


def _recall(db: Database, words: str, limit: int = 5, **kw: int) -> list[store.Hit]:
    with db.read() as conn:
        return recall_store.recall(conn, words, limit=limit, **kw)


def test_a_common_word_alone_still_recalls(db: Database) -> None:
    hits = _recall(db, "garden")  # in most items, far over the budget: still the rarest word
    assert len(hits) == 5 and all("garden" in h.item.text for h in hits)
    plan = recall_store.plan_recall(["garden"], {"garden": GARDEN}, FILLER)
    assert plan.candidates == plan.ranked_by == ("garden",)


def test_a_rare_word_beats_common_ones(db: Database) -> None:
    [rare] = _add(db, "zucchini soup on fridays")
    hits = _recall(db, "garden week zucchini")
    assert hits[0].item.id == rare
    with db.read() as conn:
        terms = recall_store.message_terms("garden week zucchini")
        items, docs = recall_store.document_counts(conn, terms)
    assert docs == {"garden": GARDEN, "week": WEEK, "zucchini": 1} and items == FILLER + 1
    plan = recall_store.plan_recall(terms, docs, items)
    assert plan.candidates == ("week", "zucchini")  # 1 + 100 items: within the budget


def test_the_cutoff_drops_a_word_in_most_items_when_rarer_ones_exist(db: Database) -> None:
    rare = _add(db, "zucchini soup", "zucchini bread with garden herbs")
    plan = recall_store.plan_recall(["garden", "zucchini"], {"garden": GARDEN, "zucchini": 2},
                             FILLER + 2)
    # "garden" neither selects (1100 items, over the budget) nor ranks (in most items)
    assert plan.candidates == ("zucchini",) and plan.ranked_by == ("zucchini",)
    hits = _recall(db, "garden zucchini", limit=10)  # room for garden items: none come
    assert sorted(h.item.id for h in hits) == sorted(rare)
    assert len(_recall(db, "garden zucchini", limit=10, budget=10**6)) == 10  # the OR of old


def test_commoner_words_still_rank_the_candidates(db: Database) -> None:
    """An item holding the rare word and a commoner one that only ranks gets its full score
    (the two rankings of `_RECALL_SPLIT` merged), so it beats one holding the rare word alone,
    though the older wins a tie."""
    alone, both = _add(db, "zucchini soup", "zucchini week")
    plan = recall_store.plan_recall(["zucchini", "week"], {"zucchini": 2, "week": WEEK + 1},
                             FILLER + 2, budget=50)
    assert plan.candidates == ("zucchini",) and plan.others == ("week",)
    hits = _recall(db, "zucchini week", budget=50)
    assert [h.item.id for h in hits] == [both, alone]
    assert hits[0].score < hits[1].score
    exact = _recall(db, "zucchini week", budget=10**6)[:2]  # the same scores as the OR of old
    assert [(h.item.id, round(h.score, 9)) for h in exact] == [
        (h.item.id, round(h.score, 9)) for h in hits]


def test_a_word_first_found_nowhere_recalls_what_is_taught_next(db: Database) -> None:
    first = _recall(db, "zucchini garden")  # zucchini counted 0, and a 0 is not kept
    assert len(first) == 5 and all("zucchini" not in h.item.text for h in first)
    [item] = _add(db, "zucchini soup")  # one item more: the kept counts stay
    assert [h.item.id for h in _recall(db, "zucchini garden")] == [item]


def test_words_no_item_holds_are_left_out(db: Database) -> None:
    plan = recall_store.plan_recall(["qqq", "week"], {"qqq": 0, "week": WEEK}, FILLER)
    assert plan.candidates == ("week",) and plan.ranked_by == ("week",)
    assert recall_store.plan_recall(["qqq"], {"qqq": 0}, FILLER) == recall_store.RecallPlan((), ())
    assert _recall(db, "qqq") == []


def test_the_item_count_is_read_from_the_index(db: Database) -> None:
    with db.read() as conn:
        assert recall_store.indexed_items(conn) == store.count(conn) == FILLER
    with db.write() as conn:
        conn.execute(delete(memory_items).where(memory_items.c.id <= 200))
    with db.read() as conn:
        assert recall_store.indexed_items(conn) == store.count(conn) == FILLER - 200
    assert recall_store._varint(bytes([0x86, 0x8D, 0x20])) == 100_000
    assert recall_store._varint(bytes([0xFF] * 8 + [0x01])) == (1 << 64) - 255


def test_match_expression_is_unchanged_for_callers() -> None:
    assert recall_store.match_expression("What about the garden, and the garden week?") == (
        '"garden" OR "week"')
    assert recall_store.match_expression("the and of") is None
