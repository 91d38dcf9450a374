"""The dashboard's door and its full chat list: sign in and out; the list of kept chats at
`/chats` (search, folders and tags to filter by, pinned chats on top, the archive), and the
forms that pin a chat and file it in a folder and under tags. Every state change is a form
post carrying the page's CSRF token (see `web.http.auth`)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.web.http import signin
from hearth.web.http.auth import require_token, signed_in
from hearth.web.http.deps import EngineDep
from hearth.web.pages.frame import page
from hearth.web.pages.ui import STATIC, form_of, render

__all__ = ["STATIC", "pages", "public"]

public = APIRouter()  # the sign-in page: the one page anyone may ask for
pages = APIRouter(dependencies=[Depends(require_token)])
VIEW = ("q", "folder", "tag")  # what a list view is: a search, a folder, a tag
PINNED = {"1": True, "0": False}


@public.get("/login")
async def login_page(request: Request) -> Response:
    if await signed_in(request, request.cookies.get(signin.COOKIE)):
        return RedirectResponse("/", status_code=303)
    return render("login.html")


@public.get("/sw.js")
async def service_worker() -> Response:
    """The dashboard's service worker (web/static/sw.js), served from the root so that it may
    answer for every page: it keeps only the gateway's own /static/ files."""
    return FileResponse(STATIC / "sw.js", media_type="text/javascript",
                        headers={"Cache-Control": "no-cache"})


@public.post("/login")
async def login(request: Request, engine: EngineDep) -> Response:
    given = (await form_of(request)).get("token", "").strip()
    expected: str = request.app.state.token
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        return render("login.html", status=401,
                      error="That is not this gateway's token.")
    cookie = signin.issue(expected)
    await engine.access.begin_signin(signin.key_of(cookie), signin.MAX_AGE)
    return _signed_in(cookie)


# What a sign-in link that signs nobody in says, and its status, by what became of it.
LINK_REFUSED = {
    "used": (410, "This sign-in link was used already: a link signs in one browser, once."),
    "expired": (410, "This sign-in link has expired: a link works for 10 minutes after it "
                     "is made."),
    "unknown": (404, "This is not a sign-in link of this gateway: it may have been copied "
                     "wrong, or it expired long ago."),
}


@public.get("/signin/link/{code}")
async def signin_link(request: Request, code: str, engine: EngineDep) -> Response:
    """A one-time sign-in link (`hearth token --link`): this browser signed in as the token's
    form signs it in, then the dashboard; a used, expired or unknown link is the sign-in
    page saying so (nothing signed in)."""
    cookie = signin.issue(request.app.state.token)
    used = await engine.access.signin_by_link(code, signin.key_of(cookie), signin.MAX_AGE)
    if used == "taken":
        answer = _signed_in(cookie)
    else:
        status, sentence = LINK_REFUSED[used]
        answer = render("login.html", status=status, notice=sentence)
    answer.headers["Cache-Control"] = "no-store"  # a link's answer is for this one opening
    return answer


def _signed_in(cookie: str) -> Response:
    """To the dashboard, with the cookie of the sign-in just begun."""
    answer = RedirectResponse("/", status_code=303)
    answer.set_cookie(signin.COOKIE, cookie, max_age=signin.MAX_AGE,
                      httponly=True, samesite="strict", path="/")
    return answer


@pages.post("/logout")
async def logout(request: Request, engine: EngineDep) -> Response:
    """Sign this page out: its sign-in ends in the store, so the cookie (or any copy of it) is
    refused from now on, and the browser is told to drop it."""
    cookie = request.cookies.get(signin.COOKIE)
    if cookie is not None and signin.valid(request.app.state.token, cookie):
        await engine.access.end_signin(signin.key_of(cookie))
    answer = RedirectResponse("/login", status_code=303)
    answer.delete_cookie(signin.COOKIE, path="/", httponly=True, samesite="strict")
    return answer


@pages.get("/chats")
async def chat_list(request: Request, engine: EngineDep,
                    q: Annotated[str | None, Query(max_length=200)] = None,
                    folder: Annotated[str | None, Query(max_length=200)] = None,
                    tag: Annotated[str | None, Query(max_length=200)] = None,
                    archived: bool = False) -> Response:
    return await _list_page(request, engine, {"q": q, "folder": folder, "tag": tag},
                            archived=archived)


async def _list_page(request: Request, engine: EngineDep, view: Mapping[str, str | None],
                     error: str | None = None, status: int = 200,
                     archived: bool = False) -> Response:
    """The chat list for a view (search, folder, tag; the archived chats, or the others),
    with the folders and tags in use."""
    q = (view.get("q") or "").strip() or None
    folder = (view.get("folder") or "").strip() or None
    tag = (view.get("tag") or "").strip().lower() or None
    rows, _ = await engine.reads.chats(limit=100, query=q, cursor=None,
                                       folder=folder, tag=tag, archived=archived)
    index = await engine.reads.filing_index()
    openings = await engine.reads.openings([r.key for r in rows])
    said = await engine.reads.said_counts([r.key for r in rows])
    here = urlencode({k: v for k, v in (("q", q), ("folder", folder), ("tag", tag)) if v})
    return await page(request, engine, "chats.html", status=status, chats=rows, query=q,
                      folder=folder, tag=tag, filing=index, openings=openings, said=said,
                      view=here,
                      archived=archived,
                      error=error, here="/chats")


@pages.post("/chats/{key}/organize")
async def organize(request: Request, key: str, engine: EngineDep) -> Response:
    """A chat row's forms: pin or unpin, or set the folder and tags; back to the list's view.
    A value that cannot be used shows the list again with the sentence saying why."""
    form = await _blank_keeping_form(request)
    if form.get("back") == "chat":  # from the chat's own menu: back to the chat
        await engine.chats.update(key, filing=_filing_of(form))
        return RedirectResponse(f"/chats/{quote(key)}", status_code=303)
    view = {name: values[0] for name, values in
            parse_qs(form.get("back", ""), keep_blank_values=True).items() if name in VIEW}
    try:
        await engine.chats.update(key, filing=_filing_of(form))
    except Refusal as refused:
        return await _list_page(request, engine, view, refused.sentence, refused.status)
    back = urlencode({name: value for name, value in view.items() if value})
    return RedirectResponse(f"/chats?{back}" if back else "/chats", status_code=303)


async def _blank_keeping_form(request: Request) -> dict[str, str]:
    """The posted form, keeping empty fields (an empty folder takes the chat out of it)."""
    raw = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}


def _filing_of(form: dict[str, str]) -> dict[str, object]:
    """What of a chat's filing the form changes: folder (empty: none), tags (separated by
    commas), pinned ("1" or "0"); the values are checked by `chats`."""
    changes: dict[str, object] = {}
    if "folder" in form:
        changes["folder"] = form["folder"].strip() or None
    if "tags" in form:
        changes["tags"] = [tag for tag in (part.strip() for part in form["tags"].split(","))
                           if tag]
    if "pinned" in form:
        changes["pinned"] = PINNED.get(form["pinned"], form["pinned"])
    if not changes:
        raise chats.ChatError("invalid_request", 422,
                              "Nothing to change: send a folder, tags or whether it is pinned.")
    return changes
