"""`GET /api/search`: search what was said across the kept chats (the engine's
`engine.operations.search`). Every parameter but `q` may be left empty (a form sends its empty
fields), which is the same as leaving it out; anything else that cannot be used answers 422 in the
error envelope, saying which. `off_path=1` also searches what each chat's path left beside
it (earlier answers kept as variants, what a rewind passed). The dashboard's search page
(`web.pages.search`) reads its parameters the same way (`web.http.params.asked_of`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hearth.engine.operations.search import SearchPage
from hearth.sessions.naming import shown_name
from hearth.web.http.deps import EngineDep
from hearth.web.http.params import asked_of
from hearth.web.http.permissions import AppName

router = APIRouter()

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


def page_view(page: SearchPage) -> dict[str, Any]:
    return {"query": page.asked.q,
            "results": [{**hit.view(), "title": shown_name(hit.title, hit.opening, hit.key)}
                        for hit in page.hits],
            "next_cursor": page.next_cursor,
            "chats": [{"key": chat.key, "title": chat.title} for chat in page.titles]}
