"""The dashboard's front page: a new chat. The owner picks the agent, the model and the kind
of chat (kept, Incognito, Temporary: `?mode=` opens it on one, each private kind saying what
it keeps) and writes the first message; the chat is made only when
that message is sent, so an empty chat is never kept. A form sent twice (the same
`client_message_id`) is one chat with one message."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from hearth.errors import Refusal
from hearth.privacy.principal import Principal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import principal_of
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])
MODES = Literal["persistent", "incognito", "temporary"]


@pages.get("/")
async def start_page(request: Request, engine: EngineDep,
                     mode: Annotated[MODES | None, Query()] = None) -> Response:
    """A new chat; `?mode=incognito` or `?mode=temporary` (the sidebar's buttons) opens it
    on that kind of chat."""
    return await _start(request, engine, {"memory_mode": mode} if mode else {})


async def _start(request: Request, engine: EngineDep, form: dict[str, str],
                 error: str | None = None, status: int = 200) -> Response:
    choices = engine.choices()  # the snapshot's models and agents, read once
    return await page(request, engine, "start.html", status=status, here="/",
                      models=list(choices.models), agents=list(choices.agents),
                      has_model=bool(choices.models), error=error,
                      owner=engine.config.agent.user_name,
                      text=form.get("text"), chosen_agent=form.get("agent"),
                      chosen_model=form.get("model"), chosen_mode=form.get("memory_mode"),
                      message_id=form.get("client_message_id") or uuid.uuid4().hex)


@pages.post("/chats/new")
async def new_chat(request: Request, engine: EngineDep) -> Response:
    """Make the chat with its first message and open it; a form that cannot be used comes
    back with what was typed and the sentence saying why."""
    form = await form_of(request)
    try:
        key = await _open_with_first(engine, form, principal_of(request))
    except Refusal as refused:
        return await _start(request, engine, form, refused.sentence, refused.status)
    return RedirectResponse(f"/chats/{quote(key)}", status_code=303)


async def _open_with_first(engine: EngineDep, form: dict[str, str],
                           principal: Principal) -> str:
    """The chat and its first message, written at once (`Engine.send_first`: a failed send
    leaves no empty chat; the same `client_message_id` is the same chat)."""
    if not form.get("text", "").strip():
        raise Refusal("empty_message", 422, "Write a first message: the chat is made when "
                      "you send it.")
    sent = await engine.send_first(
        form["text"], principal=principal, memory_mode=form.get("memory_mode") or "persistent",
        agent=form.get("agent") or None, model=form.get("model") or None,
        client_message_id=form.get("client_message_id") or uuid.uuid4().hex,
        origin="dashboard")
    return sent.session.key
