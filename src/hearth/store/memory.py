"""The memory aggregate: taught items and document passages, and keyword recall over them.

An item is one thing the agent was taught (a fact, preference, lesson or commitment), written
by someone (`written_by`: a tool, the learning chore, the owner) and filed under the chat it
came from (`filed_under`; NULL once a second chat, or the owner, stands behind it too: says it
again, or rewrites its words). An item's words may be revised, never into another item's. The
passages of the markdown memory documents are rows of kind `document` whose `source` is the
file. Recall over them is `store.recall`'s. Whether the work running now may read or change
these tables is not decided here: `privacy.stores` refuses it at the connection.

A forgotten item leaves no word behind: FTS5 keeps a deleted item's words in its index
segments until they are merged (its own `secure-delete` option needs SQLite 3.42, newer than
many systems carry), so forgetting merges them at once (`optimize`); the pages they filled
are freed and, under `secure_delete`, zeroed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, select, update

from hearth.store.db import now
from hearth.store.schema import memory_items

TABLE_PREFIX = "memory_"  # every memory table, the FTS index and its shadow tables included
KINDS = ("fact", "preference", "lesson", "commitment")
DOCUMENT = "document"
@dataclass(frozen=True)
class MemoryItem:
    id: int
    kind: str
    text: str
    source: str | None
    written_by: str
    filed_under: str | None
    created_at: float
    updated_at: float
    recall_count: int
    last_recalled_at: float | None

    @classmethod
    def of(cls, row: Any) -> MemoryItem:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Hit:
    item: MemoryItem
    score: float  # BM25: lower is better


def fingerprint(words: str) -> str:
    """What makes two items the same item: their words, case and spacing aside."""
    normal = " ".join(words.lower().split())
    return hashlib.sha256(normal.encode()).hexdigest()


@dataclass(frozen=True)
class Remembered:
    item: MemoryItem
    created: bool


def remember(conn: Connection, *, kind: str, words: str, written_by: str,
             filed_under: str | None) -> Remembered:
    """Keep an item; an item already kept is kept once, and filed under no one chat when
    another chat (or the owner) says it again."""
    mark = fingerprint(words)
    kept = conn.execute(
        select(memory_items).where(memory_items.c.fingerprint == mark,
                                   memory_items.c.kind != DOCUMENT).limit(1)
    ).first()
    if kept is not None:
        item = MemoryItem.of(kept)
        if item.filed_under is not None and item.filed_under != filed_under:
            conn.execute(update(memory_items).where(memory_items.c.id == item.id)
                         .values(filed_under=None, updated_at=now()))
            item = MemoryItem(**{**item.as_dict(), "filed_under": None})
        return Remembered(item, created=False)
    stamp = now()
    inserted = conn.execute(memory_items.insert().values(
        kind=kind, text=words, fingerprint=mark, source=None, written_by=written_by,
        filed_under=filed_under, created_at=stamp, updated_at=stamp,
    )).inserted_primary_key
    assert inserted is not None
    made = get(conn, int(inserted[0]))
    assert made is not None
    return Remembered(made, created=True)


@dataclass(frozen=True)
class Revised:
    """What revising an item did: the item as it now is (None: no taught item by that id),
    or the item whose words the new words already are (nothing changed)."""

    item: MemoryItem | None
    duplicate_of: int | None = None
    text_changed: bool = False
    changed: bool = False


def revise(conn: Connection, item_id: int, *, kind: str | None, words: str | None,
           filed_under: str | None) -> Revised:
    """Change a taught item's kind and/or words. New words that are another item's (by
    fingerprint) change nothing (`duplicate_of`); new words make the item no one chat's
    alone unless `filed_under` is the chat it is filed under (as `remember` does)."""
    item = get(conn, item_id)
    if item is None or item.kind == DOCUMENT:
        return Revised(None)
    values: dict[str, Any] = {}
    if words is not None and words != item.text:
        mark = fingerprint(words)
        other = conn.execute(select(memory_items.c.id).where(
            memory_items.c.fingerprint == mark, memory_items.c.kind != DOCUMENT,
            memory_items.c.id != item_id).limit(1)).scalar()
        if other is not None:
            return Revised(item, duplicate_of=int(other))
        values.update(text=words, fingerprint=mark)
        if item.filed_under is not None and item.filed_under != filed_under:
            values["filed_under"] = None
    if kind is not None and kind != item.kind:
        values["kind"] = kind
    if not values:
        return Revised(item)
    conn.execute(update(memory_items).where(memory_items.c.id == item_id)
                 .values(**values, updated_at=now()))
    if "text" in values:
        _merge_index(conn)  # the old words leave the keyword index at once, as on forgetting
    return Revised(get(conn, item_id), text_changed="text" in values, changed=True)


def get(conn: Connection, item_id: int) -> MemoryItem | None:
    row = conn.execute(select(memory_items).where(memory_items.c.id == item_id)).first()
    return MemoryItem.of(row) if row is not None else None


def list_items(conn: Connection, *, limit: int, before: int | None = None,
               kind: str | None = None) -> list[MemoryItem]:
    """Taught items, newest first (document passages are not items)."""
    query = select(memory_items).where(memory_items.c.kind != DOCUMENT)
    if kind is not None:
        query = query.where(memory_items.c.kind == kind)
    if before is not None:
        query = query.where(memory_items.c.id < before)
    rows = conn.execute(query.order_by(memory_items.c.id.desc()).limit(limit))
    return [MemoryItem.of(r) for r in rows]


def forget(conn: Connection, item_id: int) -> MemoryItem | None:
    """Remove one taught item; None when there is none by that id."""
    item = get(conn, item_id)
    if item is None or item.kind == DOCUMENT:
        return None
    conn.execute(delete(memory_items).where(memory_items.c.id == item_id))
    _merge_index(conn)
    return item


def forget_filed_under(conn: Connection, session_key: str) -> list[MemoryItem]:
    """Remove what is filed under this chat alone; what others stand behind stays."""
    rows = conn.execute(select(memory_items).where(memory_items.c.filed_under == session_key))
    gone = [MemoryItem.of(r) for r in rows]
    if gone:
        conn.execute(delete(memory_items).where(memory_items.c.filed_under == session_key))
        _merge_index(conn)
    return gone


def _merge_index(conn: Connection) -> None:
    """Merge the keyword index into one segment (SQLite), dropping the words of the items
    deleted since: until then FTS5 keeps them in the segments that indexed them."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")


def count(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(memory_items)).scalar_one())


_MARK = (update(memory_items)
         .where(memory_items.c.id.in_(bindparam("ids", expanding=True)))
         .values(recall_count=memory_items.c.recall_count + 1,
                 last_recalled_at=bindparam("at")))


def mark_recalled(conn: Connection, ids: Sequence[int]) -> None:
    if ids:
        conn.execute(_MARK, {"ids": list(ids), "at": now()})


def replace_document(conn: Connection, source: str, passages: Iterable[str]) -> int:
    """Index a memory document afresh: its old passages go, these come in."""
    conn.execute(delete(memory_items).where(memory_items.c.source == source,
                                            memory_items.c.kind == DOCUMENT))
    stamp = now()
    rows = [{"kind": DOCUMENT, "text": p, "fingerprint": fingerprint(p), "source": source,
             "written_by": "document", "filed_under": None, "created_at": stamp,
             "updated_at": stamp} for p in passages]
    if rows:
        conn.execute(memory_items.insert(), rows)
    return len(rows)


def document_sources(conn: Connection) -> set[str]:
    rows = conn.execute(select(memory_items.c.source).distinct()
                        .where(memory_items.c.kind == DOCUMENT))
    return {str(r[0]) for r in rows}
