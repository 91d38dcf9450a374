"""A chat's page: its transcript rendered by the turn templates, the composer, and the
actions a page takes on a turn. The live stream (`web.chat_stream`) renders its frames with the
same templates, so a turn looks the same live and after a reload."""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from hearth.engine.views import message_view
from hearth.sessions import chats
from hearth.web.auth import require_token
from hearth.web.ui import EngineDep, csrf_of, form_of, render

MODE_LINES = {
    "incognito": ("Incognito chat", "It reads your memory but keeps nothing in it, and it is "
                  "never listed or searchable."),
    "temporary": ("Temporary chat", "It neither reads nor keeps your memory, and it is "
                  "forgotten when you delete it, when the gateway stops, or when it sits idle."),
}

pages = APIRouter(dependencies=[Depends(require_token)])


@pages.get("/chats/{key}")
async def chat_page(request: Request, key: str, engine: EngineDep) -> Response:
    window = await asyncio.to_thread(chats.read_chat, engine.db, key, limit=200, before=None)
    name, line = MODE_LINES.get(window.session.memory_mode, (None, None))
    return render("chat.html", chat=window.session, csrf=csrf_of(request), mode_name=name,
                  mode_line=line, messages=[message_view(e) for e in window.events],
                  running=window.current_run is not None,
                  message_id=uuid.uuid4().hex)  # a form sent twice is one message


@pages.post("/chats/{key}/send")
async def send(request: Request, key: str, engine: EngineDep) -> Response:
    """The composer's post: admit the message, then back to the chat's page."""
    form = await form_of(request)
    admitted = engine.send(key, form.get("text", ""),
                           client_message_id=form.get("client_message_id") or None,
                           dispatch=False)
    if not admitted.duplicate:
        engine.dispatch(key)
    return RedirectResponse(f"/chats/{quote(key)}", status_code=303)
