"""`GET /api/search`: search what was said across the kept chats (the engine's
`engine.operations.search`). Every parameter but `q` may be left empty (a form sends its empty
fields), which is the same as leaving it out; anything else that cannot be used answers 422 in the
error envelope, saying which. `off_path=1` also searches what each chat's path left beside
it (earlier answers kept as variants, what a rewind passed). The dashboard's search page
(`web.pages.search`) reads its parameters the same way (`asked_of`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hearth.engine.operations import search as chat_search
from hearth.engine.operations.search import Asked, SearchPage
from hearth.errors import Refusal
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import AppName
from hearth.web.pages.ui import shown_name

router = APIRouter()
CHOICE = {"": None, "1": True, "true": True, "0": False, "false": False}
DEFAULT_LIMIT = 20

Text = Annotated[str | None, Query(max_length=200)]
Day = Annotated[str | None, Query(max_length=10, description="YYYY-MM-DD, the gateway's time "
                                                             "zone, included")]


@router.get("/api/search")
async def search(engine: EngineDep, app: AppName,
                 q: Annotated[str, Query(max_length=200)] = "",
                 folder: Text = None, tag: Text = None, pinned: Text = None,
                 archived: Text = None, since: Day = None, until: Day = None,
                 limit: Text = None, cursor: Text = None, off_path: Text = None
                 ) -> dict[str, Any]:
    asked = asked_of(q, folder=folder, tag=tag, pinned=pinned, archived=archived,
                     since=since, until=until, limit=limit, cursor=cursor, off_path=off_path)
    page = await engine.reads.search(asked)
    if app is not None:  # an app finds only what was said in the chats it started
        own = await engine.reads.own_keys(app, {hit.key for hit in page.hits}
                                  | {chat.key for chat in page.titles})
        page = replace(page, hits=[hit for hit in page.hits if hit.key in own],
                       titles=[chat for chat in page.titles if chat.key in own])
    return page_view(page)


def asked_of(q: str, *, folder: str | None = None, tag: str | None = None,
             pinned: str | None = None, archived: str | None = None, since: str | None = None,
             until: str | None = None, limit: str | None = None, cursor: str | None = None,
             off_path: str | None = None) -> Asked:
    """A search from a request's parameters (an empty one is one left out); 422 for a value
    that cannot be used. The engine checks the rest (`engine.operations.search.checked`)."""
    return Asked(q, folder=folder or None, tag=tag or None, pinned=_choice("pinned", pinned),
                 archived=bool(_choice("archived", archived)), since=_day("since", since),
                 until=_day("until", until), limit=_limit(limit), cursor=cursor or None,
                 off_path=bool(_choice("off_path", off_path)))


def page_view(page: SearchPage) -> dict[str, Any]:
    return {"query": page.asked.q,
            "results": [{**hit.view(), "title": shown_name(hit.title, hit.opening, hit.key)}
                        for hit in page.hits],
            "next_cursor": page.next_cursor,
            "chats": [{"key": chat.key, "title": chat.title} for chat in page.titles]}


def _choice(name: str, value: str | None) -> bool | None:
    if (value or "").lower() not in CHOICE:
        raise Refusal("invalid_request", 422, f"{name} must be 1 or 0 (or left empty).")
    return CHOICE[(value or "").lower()]


def _day(name: str, value: str | None) -> date | None:
    if not value:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise Refusal("invalid_request", 422,
                      f"{name} must be a date as YYYY-MM-DD, like 2026-03-01.") from None


def _limit(value: str | None) -> int:
    if not value:
        return DEFAULT_LIMIT
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= chat_search.MAX_LIMIT:
        raise Refusal("invalid_limit", 422,
                      f"limit must be a whole number from 1 to {chat_search.MAX_LIMIT}.")
    return int(value)
