"""A chat's menu on its page: rename it; choose its model, agent and trust (from the next
turn); compact what its model reads now; archive and restore it; delete it after a page
that says what goes. Plain form posts carrying the page's CSRF token; each answers with the
chat's page again (or the list, for a deleted chat). What the API can do to a chat, the page
can do too."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from hearth.sessions.naming import shown_name
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])
TRUSTED = {"1": "trusted", "": "ask"}


def _to_chat(key: str) -> RedirectResponse:
    return RedirectResponse(f"/chats/{quote(key)}", status_code=303)


@pages.post("/chats/{key}/rename")
async def rename(request: Request, key: str, engine: EngineDep) -> Response:
    form = await form_of(request)
    await engine.chats.update(key, title=form.get("title", ""))
    return _to_chat(key)


@pages.post("/chats/{key}/setup")
async def setup(request: Request, key: str, engine: EngineDep) -> Response:
    """What the chat runs on from its next turn: model (empty: the chat chain), agent, trust."""
    form = await form_of(request)
    runs_on = {"model": form.get("model") or None, "agent": form.get("agent") or None}
    trust = TRUSTED.get(form.get("trusted", ""), "ask")
    kept = await engine.reads.chat(key)
    await engine.chats.update(key, runs_on=runs_on, choices=engine.choices(),
                       trust=trust if kept.memory_mode == "persistent" else None)
    return _to_chat(key)


@pages.post("/chats/{key}/archive")
async def archive(request: Request, key: str, engine: EngineDep) -> Response:
    """Archive (out of the sidebar and the list) or restore (`archived=0`)."""
    form = await form_of(request)
    await engine.chats.update(key, archived=form.get("archived", "1") != "0")
    if form.get("back") == "list":
        return RedirectResponse("/chats?archived=1", status_code=303)
    return _to_chat(key)


@pages.post("/chats/{key}/compact")
async def compact(key: str, engine: EngineDep) -> Response:
    """Compact now (`engine.turn.compaction.on_request`): the chat shows the notice; a refusal
    is its page."""
    done = await engine.chats.compact(key)
    if not done.compacted:  # nothing folded: the page says so rather than nothing at all
        return RedirectResponse(f"/chats/{quote(key)}?note=nothing-to-compact", status_code=303)
    return _to_chat(key)


@pages.get("/chats/{key}/delete")
async def confirm_delete(request: Request, key: str, engine: EngineDep) -> Response:
    """The page that says what a delete takes away, with the button that does it."""
    chat = await engine.reads.chat(key)
    opening = None if chat.title else (await engine.reads.openings([key])).get(key)
    return await page(request, engine, "delete.html", current=key, chat=chat,
                      shown=shown_name(chat.title, opening, key))


@pages.post("/chats/{key}/delete")
async def delete(key: str, engine: EngineDep) -> Response:
    """Delete the chat and everything of it (`engine.operations.deletion`); a part that could not go
    keeps the chat and answers 409 with what is left."""
    await engine.delete_chat(key)
    return RedirectResponse("/", status_code=303)
