"""Routes for memory: list and search what the agent was taught, teach it, revise an item's
kind or words, forget an item. An item's view names the chat it is filed under
(`filed_under`, null when no one chat stands behind it) and the document a passage is from
(`source`), so a page can link to them.

A request is the owner's unless it names a chat with `X-Hearth-Session: <key>`. Then it is
that chat's work: it runs inside the chat's work scope (`privacy.scope.as_work_of`, with the
mode its record says), so the same rules hold as for the chat's own turns — an Incognito chat
reads memory but keeps nothing, a Temporary chat (or one whose mode cannot be read) neither
reads nor keeps, and each refusal answers 403 `restricted_session` with nothing written. What
a persistent chat teaches is filed under it. The owner's search leaves no recall marks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from hearth.engine.operations.memory_edit import revise_memory
from hearth.engine.reads.facade import MemoryItem, SessionRow
from hearth.engine.runtime import Engine
from hearth.engine.views import iso
from hearth.errors import Refusal
from hearth.memory.desk import MemoryDesk
from hearth.privacy.scope import as_work_of
from hearth.web.http.deps import EngineDep, SessionHeader
from hearth.web.http.params import MAX_TEXT, Kind

router = APIRouter()
MAX_ID = 2**62  # ids are SQLite integers; larger is no item
MAX_SEARCH_POOL = 1000  # a search filtered by kind picks from this many best matches


class Teach(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT, pattern=r"\S")
    kind: Kind


class Revise(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, min_length=1, max_length=MAX_TEXT, pattern=r"\S")
    kind: Kind | None = None


def item_view(item: MemoryItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "kind": item.kind,
        "text": item.text,
        "source": item.source,
        "written_by": item.written_by,
        "filed_under": item.filed_under,
        "recall_count": item.recall_count,
        "last_recalled_at": iso(item.last_recalled_at),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
    }


async def _chat_of(engine: Engine, key: str | None) -> SessionRow | None:
    """The chat a request is made for (404 session_not_found), or None for the owner."""
    if key is None:
        return None
    return await engine.reads.chat(key)


@contextmanager
def _as(chat: SessionRow | None) -> Iterator[None]:
    """The work awaited inside runs as `chat`'s work (in its recorded mode), or the owner's:
    the store's threads run in a copy of the context, so they carry the scope."""
    if chat is None:
        yield
        return
    with as_work_of(chat.key, chat.memory_mode):
        yield


async def _search(memory: MemoryDesk, words: str, limit: int,
                  kind: str | None) -> list[MemoryItem]:
    pool = limit if kind is None else MAX_SEARCH_POOL
    items = [hit.item for hit in await memory.search(words, pool)]
    if kind is not None:
        items = [item for item in items if item.kind == kind]
    return items[:limit]


@router.get("/api/memory")
async def list_memory(
    engine: EngineDep,
    q: Annotated[str | None, Query(max_length=500)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    kind: Annotated[Kind | None, Query()] = None,
    session: SessionHeader = None,
) -> dict[str, Any]:
    """Newest first (paged by `before`), or with `q` the best keyword matches in one page."""
    chat = await _chat_of(engine, session)
    words = (q or "").strip()
    if words:
        if before is not None:
            raise Refusal("invalid_request", 422,
                          "before pages the newest-first list; a search (q) answers its best "
                          "matches in one page.")
        with _as(chat):
            found = await _search(engine.memory_desk, words, limit, kind)
        return {"items": [item_view(i) for i in found], "next_before": None}
    with _as(chat):
        page = await engine.memory_desk.items(limit=limit + 1, before=before, kind=kind)
    more = len(page) > limit
    page = page[:limit]
    return {"items": [item_view(i) for i in page],
            "next_before": page[-1].id if more and page else None}


@router.post("/api/memory")
async def teach_memory(body: Teach, engine: EngineDep,
                       session: SessionHeader = None) -> JSONResponse:
    """Keep an item (201); the same words again answer the item already kept (200)."""
    chat = await _chat_of(engine, session)
    with _as(chat):
        kept = await engine.memory_desk.remember(
            kind=body.kind, words=body.text.strip(),
            written_by="owner" if chat is None else f"api:{chat.key}",
            filed_under=None if chat is None else chat.key)
    return JSONResponse(item_view(kept.item), status_code=201 if kept.created else 200)


@router.patch("/api/memory/{item_id}")
async def revise_item(
    item_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    body: Revise,
    engine: EngineDep,
    session: SessionHeader = None,
) -> dict[str, Any]:
    """Change an item's kind and/or words (409 `memory_duplicate` when the words are another
    item's)."""
    chat = await _chat_of(engine, session)
    if chat is None:
        item = await revise_memory(engine.memory, item_id, kind=body.kind, text=body.text)
    else:
        with as_work_of(chat.key, chat.memory_mode):  # as that chat's work, in its mode
            item = await revise_memory(engine.memory, item_id, kind=body.kind, text=body.text,
                                       filed_under=chat.key)
    return item_view(item)


@router.delete("/api/memory/{item_id}")
async def forget_memory(
    item_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    engine: EngineDep,
    session: SessionHeader = None,
) -> dict[str, Any]:
    chat = await _chat_of(engine, session)
    with _as(chat):
        gone = await engine.memory_desk.forget(item_id)
    if gone is None:
        raise Refusal("memory_not_found", 404, f"There is no memory item {item_id}.")
    return {"forgotten": item_id}
