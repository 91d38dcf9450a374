"""The dashboard's search page, `/search`: what was said in the kept chats (the sidebar's
search box and the chat list's search row send here). The form with its filters (folder, tag,
pinned, the archive, a date range), the chats whose title matches, then the messages found:
the chat, who said it and when, a snippet whose matched words are marked, and a link that
opens the chat on the page that holds the message (`before=` when it is older than the
chat's newest page) at the message itself (`#seq-N`). A query that cannot be searched shows
the form again with the sentence saying why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from hearth.engine.operations.search import SearchHit, SearchPage
from hearth.errors import Refusal
from hearth.web.http.deps import EngineDep
from hearth.web.http.params import asked_of
from hearth.web.pages.chat import WINDOW
from hearth.web.pages.frame import page

router = APIRouter()  # signed-in: app.py includes it among the protected routes

Text = Annotated[str | None, Query(max_length=200)]


@dataclass(frozen=True)
class Shown:
    """A hit as the page draws it."""

    hit: SearchHit
    parts: list[tuple[str, bool]]  # the snippet's runs of text, each matched or not
    link: str


@router.get("/search")
async def search_page(request: Request, engine: EngineDep, q: Text = None, folder: Text = None,
                      tag: Text = None, pinned: Text = None, archived: Text = None,
                      since: Text = None, until: Text = None, cursor: Text = None) -> Response:
    values = {"q": q or "", "folder": folder or "", "tag": tag or "", "pinned": pinned or "",
              "archived": archived or "", "since": since or "", "until": until or ""}
    found, error = None, None
    if (q or "").strip():
        try:
            asked = asked_of(q or "", folder=folder, tag=tag, pinned=pinned,
                             archived=archived, since=since, until=until, cursor=cursor)
            found = await engine.reads.search(asked)
        except Refusal as refused:
            error = refused.sentence
    return await page(request, engine, "search.html", status=422 if error else 200,
                      query=values["q"], values=values, error=error, found=found,
                      shown=_shown(found), more=_more(values, found),
                      filing=await engine.reads.filing_index(), here="/search")


def _shown(found: SearchPage | None) -> list[Shown]:
    return [] if found is None else [Shown(hit, parts(hit.snippet, hit.marks), link_to(hit))
                                     for hit in found.hits]


def parts(text: str, marks: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """`text` cut into runs, each matched (a mark) or not; the template escapes every run."""
    runs: list[tuple[str, bool]] = []
    at = 0
    for start, end in sorted(marks):
        if start < at:
            continue  # overlapping marks: the first one stands
        if start > at:
            runs.append((text[at:start], False))
        runs.append((text[start:end], True))
        at = end
    if at < len(text):
        runs.append((text[at:], False))
    return runs


def link_to(hit: SearchHit) -> str:
    """The chat's page holding the message, at the message: the newest page when the message
    is on it (fewer than WINDOW events since), else the page of the WINDOW events up to it."""
    where = f"/chats/{quote(hit.key, safe='')}"
    if hit.last_seq - hit.seq >= WINDOW:
        where += f"?before={hit.seq + 1}"
    return f"{where}#seq-{hit.seq}"


def _more(values: dict[str, str], found: SearchPage | None) -> str | None:
    """The next page's address, when there is one."""
    if found is None or found.next_cursor is None:
        return None
    kept = {name: value for name, value in values.items() if value}
    return "/search?" + urlencode({**kept, "cursor": found.next_cursor})
