"""The dashboard's pages: sign in, the chat list (with new-chat buttons and search), and a
chat's page. Server-rendered with Jinja2 (autoescaped: every piece of user, model and tool
text is escaped); state changes are plain form posts carrying the page's CSRF token.

This is the first slice of the dashboard; streaming, the composer and the other pages build
on it.
"""

from __future__ import annotations

import asyncio
import hmac
import uuid
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader

from hearth.engine.runtime import Engine
from hearth.engine.views import message_view
from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.web import markdown, signin
from hearth.web.auth import require_token
from hearth.web.deps import engine_of

HERE = Path(__file__).parent
STATIC = HERE / "static"
templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
templates.globals["markdown"] = markdown.render
EngineDep = Annotated[Engine, Depends(engine_of)]
MODE_LINES = {
    "incognito": ("Incognito chat", "It reads your memory but keeps nothing in it, and it is "
                  "never listed or searchable."),
    "temporary": ("Temporary chat", "It neither reads nor keeps your memory, and it is "
                  "forgotten when you delete it, when the gateway stops, or when it sits idle."),
}

public = APIRouter()  # the sign-in page: the one page anyone may ask for
pages = APIRouter(dependencies=[Depends(require_token)])


def render(name: str, status: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(templates.get_template(name).render(**values), status_code=status)


async def _form(request: Request) -> dict[str, str]:
    raw = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(raw).items()}


def _csrf(request: Request) -> str:
    return signin.csrf_for(request.app.state.token, request.cookies.get(signin.COOKIE, ""))


@public.get("/login")
async def login_page(request: Request) -> Response:
    if signin.valid(request.app.state.token, request.cookies.get(signin.COOKIE)):
        return RedirectResponse("/", status_code=303)
    return render("login.html")


@public.post("/login")
async def login(request: Request) -> Response:
    given = (await _form(request)).get("token", "").strip()
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
    return render("chats.html", chats=rows, query=q, csrf=_csrf(request),
                  has_model=bool(engine.deps.models.ids()))


@pages.post("/chats/new")
async def new_chat(request: Request, engine: EngineDep) -> Response:
    mode = (await _form(request)).get("memory_mode", "persistent")
    if mode not in chats.MEMORY_MODES:
        raise Refusal("invalid_memory_mode", 422,
                      f"memory_mode must be one of {', '.join(chats.MEMORY_MODES)}.")
    opened = await asyncio.to_thread(chats.open_chat, engine.db, memory_mode=mode,
                                     origin="dashboard")
    return RedirectResponse(f"/chats/{quote(opened.session.key)}", status_code=303)


@pages.get("/chats/{key}")
async def chat_page(request: Request, key: str, engine: EngineDep) -> Response:
    window = await asyncio.to_thread(chats.read_chat, engine.db, key, limit=200, before=None)
    name, line = MODE_LINES.get(window.session.memory_mode, (None, None))
    return render("chat.html", chat=window.session, csrf=_csrf(request), mode_name=name,
                  mode_line=line, messages=[message_view(e) for e in window.events],
                  running=window.current_run is not None,
                  message_id=uuid.uuid4().hex)  # a form sent twice is one message


@pages.post("/chats/{key}/send")
async def send(request: Request, key: str, engine: EngineDep) -> Response:
    """The composer's post: admit the message, then back to the chat's page."""
    form = await _form(request)
    admitted = engine.send(key, form.get("text", ""),
                           client_message_id=form.get("client_message_id") or None,
                           dispatch=False)
    if not admitted.duplicate:
        engine.dispatch(key)
    return RedirectResponse(f"/chats/{quote(key)}", status_code=303)
