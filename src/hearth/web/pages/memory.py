"""The dashboard's Memory page: what the agent was taught, newest first (paged with
`before=`), a keyword search over it and the memory documents, a small form at the top that
teaches an item (kind and words), and per item an Edit (its kind and words, in place) and a
Delete button (form posts carrying the page's CSRF token). Each item names the chat it is
filed under, with a link, or the memory document a passage is from.

Adding and editing go through the engine's memory functions the API uses (`memory_api`), so
the same rules hold: the same limits, the same words kept once, no item's words turned into
another's. A form that is refused comes back as this page with the sentence (and what was
typed), not as JSON. The page is the owner's: it reads as the owner and, like the owner's
search in the API, leaves no recall marks."""

from __future__ import annotations

import re
from typing import Annotated, Any, get_args
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from hearth.engine.operations.memory_edit import revise_memory
from hearth.engine.reads.facade import DOCUMENT, MemoryItem
from hearth.errors import Refusal
from hearth.memory.desk import MemoryDesk
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.params import MAX_TEXT, Kind
from hearth.web.pages.approvals import chat_names
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])

MAX_ID = 2**62  # ids are SQLite integers; larger is no item
_DIGITS = re.compile(r"[0-9]{1,19}")
PAGE = 50
SEARCH_LIMIT = 50
KINDS = get_args(Kind)  # what an item the owner teaches may be

# What the page says after a change (`?done=`); anything else says nothing.
DONE = {
    "added": "Added to memory. Your agent can recall it from your next message.",
    "known": "That is already in memory, so nothing was added.",
    "saved": "Saved.",
}


async def _search(memory: MemoryDesk, words: str) -> list[MemoryItem]:
    return [hit.item for hit in await memory.search(words, SEARCH_LIMIT)]


def _back(words: str, done: str, item_id: int | None = None) -> RedirectResponse:
    """Back to the list (or the search the form was sent from), saying what was done."""
    query = {"q": words, "done": done} if words else {"done": done}
    where = f"#memory-{item_id}" if item_id is not None else ""
    return RedirectResponse(f"/memory?{urlencode(query)}{where}", status_code=303)


def _checked(form: dict[str, str]) -> tuple[str, str]:
    """The kind and the words of an item to keep, as the API checks them (422 otherwise)."""
    kind = form.get("kind", "")
    words = form.get("text", "").strip()
    if kind not in KINDS:
        raise Refusal("invalid_request", 422,
                      f"Pick what kind of item this is: {', '.join(KINDS)}.")
    if not words:
        raise Refusal("invalid_request", 422, "Write what your agent should remember.")
    if len(words) > MAX_TEXT:
        raise Refusal("invalid_request", 422,
                      f"An item is at most {MAX_TEXT:,} characters; this one is "
                      f"{len(words):,}. Split it into smaller items.")
    return kind, words


async def _memory_page(request: Request, engine: EngineDep, *, words: str = "",
                       before: int | None = None, status: int = 200,
                       **values: Any) -> Response:
    if words:
        found = await _search(engine.memory_desk, words)
        more = None
    else:
        found = await engine.memory_desk.items(limit=PAGE + 1, before=before)
        more = found[PAGE - 1].id if len(found) > PAGE else None
        found = found[:PAGE]
    chats = await chat_names(engine, {i.filed_under for i in found if i.filed_under})
    values.setdefault("adding", {})
    values.setdefault("editing", None)
    return await page(request, engine, "memory.html", status=status, query=words,
                      paged=before is not None, items=found, document=DOCUMENT, chats=chats,
                      kinds=KINDS, max_text=MAX_TEXT,
                      more=f"/memory?{urlencode({'before': more})}" if more else None,
                      **values)


@pages.get("/memory")
async def memory_page(
    request: Request,
    engine: EngineDep,
    q: Annotated[str | None, Query(max_length=500)] = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    done: str | None = None,
) -> Response:
    """Newest first, `PAGE` at a time; with `q`, the best keyword matches in one page."""
    words = (q or "").strip()
    if words and before is not None:
        raise Refusal("invalid_request", 422,
                      "before pages the newest-first list; a search (q) shows its best "
                      "matches in one page.")
    return await _memory_page(request, engine, words=words, before=before,
                              done=DONE.get(done or ""))


@pages.post("/memory/add")
async def add_item(request: Request, engine: EngineDep) -> Response:
    """Teach an item as the owner (filed under no one chat); the same words again add
    nothing and say so."""
    form = await form_of(request)
    try:
        kind, words = _checked(form)
        kept = await engine.memory_desk.remember(kind=kind, words=words, written_by="owner",
                                                 filed_under=None)
    except Refusal as refused:
        return await _memory_page(request, engine, status=refused.status,
                                  problem=refused.sentence,
                                  adding={"kind": form.get("kind", ""),
                                          "text": form.get("text", "")})
    return _back("", "added" if kept.created else "known", kept.item.id)


@pages.post("/memory/{item_id}/edit")
async def edit_item(request: Request, engine: EngineDep, item_id: str) -> Response:
    """Change an item's kind and words (404 when there is none, whatever the id is; 409 when
    the words are another item's), then back to the list with the item in view."""
    form = await form_of(request)
    words = form.get("q", "").strip()[:500]
    number = int(item_id) if _DIGITS.fullmatch(item_id) else 0
    try:  # checked by the engine, as the API's edits are
        if not 1 <= number <= MAX_ID:
            raise Refusal("memory_not_found", 404, f"There is no memory item {item_id[:40]}.")
        await revise_memory(engine.memory, number, kind=form.get("kind") or None,
                            text=form.get("text", ""))
    except Refusal as refused:
        return await _memory_page(request, engine, words=words, status=refused.status,
                                  problem=refused.sentence,
                                  editing={"id": number, "kind": form.get("kind", ""),
                                           "text": form.get("text", "")})
    return _back(words, "saved", number)


@pages.post("/memory/{item_id}/delete")
async def delete_item(request: Request, engine: EngineDep,
                      item_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> Response:
    """Forget the item (404 `memory_not_found` when there is none), then back to the list
    (or the search the button was pressed in)."""
    form = await form_of(request)
    gone = await engine.memory_desk.forget(item_id)
    if gone is None:
        raise Refusal("memory_not_found", 404, f"There is no memory item {item_id}.")
    words = form.get("q", "").strip()[:500]
    back = f"/memory?{urlencode({'q': words})}" if words else "/memory"
    return RedirectResponse(back, status_code=303)
