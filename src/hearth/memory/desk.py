"""Memory as the surfaces reach it, awaited: `MemoryDesk` lists, searches, teaches and forgets
over the same service (`memory.service.Memory`) the turn and the memory tools use, with the
same refusals, on the store's seam (reads on its reader threads, changes by its one writer)
and the documents' file work in a thread.

Each refusal is decided for the work running now, and the scope travels with the work: the
store's threads and `asyncio.to_thread` run in a copy of the caller's context, so a request
made as a chat's work (`privacy.scope.as_work_of` around the await) is held to that chat's
mode at the store as well (`privacy.stores`). The owner's search leaves no recall marks."""

from __future__ import annotations

import asyncio

from hearth.memory.service import FORGOT_NOTHING, RECALL_LIMIT, Memory, refuse_read, refuse_write
from hearth.store import memory as store, recall as recall_store
from hearth.store.memory import Hit, MemoryItem, Remembered


class MemoryDesk:
    """The memory service's surface doors, each awaited."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._db = memory.db

    async def items(self, *, limit: int, before: int | None = None,
                    kind: str | None = None) -> list[MemoryItem]:
        """Newest first, paged by `before`."""
        refuse_read()
        return await self._db.reading(store.list_items, limit=limit, before=before, kind=kind)

    async def search(self, words: str, limit: int = RECALL_LIMIT) -> list[Hit]:
        """The best matches for `words` (keyword, BM25), leaving no mark."""
        refuse_read()
        return await self._db.reading(recall_store.recall, words, limit=limit)

    async def remember(self, *, kind: str, words: str, written_by: str,
                       filed_under: str | None) -> Remembered:
        """Keep an item (a promise); the same words again answer the item already kept."""
        refuse_write()
        kept: Remembered = await self._db.writing(store.remember, kind=kind, words=words,
                                                  written_by=written_by,
                                                  filed_under=filed_under)
        if kept.created:
            await asyncio.to_thread(self._memory.documents.append_history, kept.item.id, kind,
                                    words)
        return kept

    async def forget(self, item_id: int) -> MemoryItem | None:
        """Forget the item, leaving no trace of its words; None when there is none."""
        refuse_write(FORGOT_NOTHING)
        gone: MemoryItem | None = await self._db.writing(store.forget, item_id)
        if gone is not None:
            await asyncio.to_thread(self._memory.leave_no_trace, gone)
        return gone
