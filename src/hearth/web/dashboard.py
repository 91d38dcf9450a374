"""The dashboard's front door and chat list: sign in and out, the list of kept chats (with
search), and the buttons that make a new chat in each memory mode. Every state change is a
form post carrying the page's CSRF token (see `web.auth`)."""

from __future__ import annotations

import asyncio
import hmac
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.web import signin
from hearth.web.auth import require_token
from hearth.web.ui import STATIC, EngineDep, csrf_of, form_of, render

__all__ = ["STATIC", "pages", "public"]

public = APIRouter()  # the sign-in page: the one page anyone may ask for
pages = APIRouter(dependencies=[Depends(require_token)])


@public.get("/login")
async def login_page(request: Request) -> Response:
    if signin.valid(request.app.state.token, request.cookies.get(signin.COOKIE)):
        return RedirectResponse("/", status_code=303)
    return render("login.html")


@public.post("/login")
async def login(request: Request) -> Response:
    given = (await form_of(request)).get("token", "").strip()
    expected: str = request.app.state.token
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        return render("login.html", status=401,
                      error="That is not this gateway's token. `hearth token` prints it.")
    answer = RedirectResponse("/", status_code=303)
    answer.set_cookie(signin.COOKIE, signin.issue(expected), max_age=signin.MAX_AGE,
                      httponly=True, samesite="strict", path="/")
    return answer


@pages.post("/logout")
async def logout() -> Response:
    answer = RedirectResponse("/login", status_code=303)
    answer.delete_cookie(signin.COOKIE, path="/", httponly=True, samesite="strict")
    return answer


@pages.get("/")
async def chat_list(request: Request, engine: EngineDep,
                    q: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    rows, _ = await asyncio.to_thread(chats.list_chats, engine.db, limit=100, query=q or None,
                                      cursor=None)
    return render("chats.html", chats=rows, query=q, csrf=csrf_of(request),
                  has_model=bool(engine.deps.models.ids()))


@pages.post("/chats/new")
async def new_chat(request: Request, engine: EngineDep) -> Response:
    mode = (await form_of(request)).get("memory_mode", "persistent")
    if mode not in chats.MEMORY_MODES:
        raise Refusal("invalid_memory_mode", 422,
                      f"memory_mode must be one of {', '.join(chats.MEMORY_MODES)}.")
    opened = await asyncio.to_thread(chats.open_chat, engine.db, memory_mode=mode,
                                     origin="dashboard")
    return RedirectResponse(f"/chats/{quote(opened.session.key)}", status_code=303)
