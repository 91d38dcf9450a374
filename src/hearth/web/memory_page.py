"""The dashboard's Memory page: what the agent was taught, newest first (paged with
`before=`), a keyword search over it and the memory documents, and a Delete button per item
(a form post carrying the page's CSRF token). The page is the owner's: it reads as the owner
and, like the owner's search in the API, leaves no recall marks."""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from hearth.engine.rows import DOCUMENT, MemoryItem
from hearth.errors import Refusal
from hearth.memory.service import Memory
from hearth.web.auth import require_token
from hearth.web.deps import EngineDep
from hearth.web.shell import page
from hearth.web.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])

MAX_ID = 2**62  # ids are SQLite integers; larger is no item
PAGE = 50
SEARCH_LIMIT = 50


def _search(memory: Memory, words: str) -> list[MemoryItem]:
    return [hit.item for hit in memory.search(words, SEARCH_LIMIT)]


@pages.get("/memory")
async def memory_page(
    request: Request,
    engine: EngineDep,
    q: Annotated[str | None, Query(max_length=500)] = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    """Newest first, `PAGE` at a time; with `q`, the best keyword matches in one page."""
    words = (q or "").strip()
    if words and before is not None:
        raise Refusal("invalid_request", 422,
                      "before pages the newest-first list; a search (q) shows its best "
                      "matches in one page.")
    if words:
        found = await asyncio.to_thread(_search, engine.memory, words)
        more = None
    else:
        found = await asyncio.to_thread(engine.memory.items, limit=PAGE + 1, before=before)
        more = found[PAGE - 1].id if len(found) > PAGE else None
        found = found[:PAGE]
    return await page(request, engine, "memory.html", query=words,
                  paged=before is not None, items=found, document=DOCUMENT,
                  more=f"/memory?{urlencode({'before': more})}" if more else None)


@pages.post("/memory/{item_id}/delete")
async def delete_item(request: Request, engine: EngineDep,
                      item_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> Response:
    """Forget the item (404 `memory_not_found` when there is none), then back to the list
    (or the search the button was pressed in)."""
    form = await form_of(request)
    gone = await asyncio.to_thread(engine.memory.forget, item_id)
    if gone is None:
        raise Refusal("memory_not_found", 404, f"There is no memory item {item_id}.")
    words = form.get("q", "").strip()[:500]
    back = f"/memory?{urlencode({'q': words})}" if words else "/memory"
    return RedirectResponse(back, status_code=303)
