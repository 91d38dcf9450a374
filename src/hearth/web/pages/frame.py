"""The frame around every signed-in page: the sidebar (chats grouped by date, pinned first, the
restricted chats apart and first, each kind with its own mark, a mark on a chat that waits on
you; `/sidebar` draws its chats alone again for the sidebar's script), the theme the owner
chose, and `page()`, which renders a template inside that frame. The theme is a cookie, so
the page is drawn in it from the first byte and the toggle works as a plain form without the
scripts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from hearth.engine.reads.sidebar import Sidebar, SidebarChat
from hearth.engine.views import moment
from hearth.errors import Refusal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages import privacy_view
from hearth.web.pages.ui import csrf_of, form_of, fragment, in_local_zone, render

THEME_COOKIE = "hearth_theme"
THEMES = ("system", "light", "dark")
YEAR = 365 * 24 * 3600
UNREADABLE_GROUP = "Date unreadable"  # the chats whose last change is no time it can read

pages = APIRouter(dependencies=[Depends(require_token)])


@dataclass(frozen=True)
class Group:
    label: str
    chats: list[SidebarChat]


def grouped(chats: list[SidebarChat], today: date) -> list[Group]:
    """Pinned first, then Today, Yesterday, Previous 7 days, and one group per older month,
    each newest first (the order the chats come in)."""
    groups: dict[str, list[SidebarChat]] = {}
    for chat in chats:
        label = "Pinned" if chat.pinned else _when(in_local_zone(moment(chat.updated_at)), today)
        groups.setdefault(label, []).append(chat)
    return [Group(label, items) for label, items in groups.items()]


def _when(when: datetime | None, today: date) -> str:
    if when is None:
        return UNREADABLE_GROUP
    day = when.date()
    if day >= today:
        return "Today"
    if day == today - timedelta(days=1):
        return "Yesterday"
    if day > today - timedelta(days=7):
        return "Previous 7 days"
    return day.strftime("%B %Y")


def theme_of(request: Request) -> str:
    chosen = request.cookies.get(THEME_COOKIE, "system")
    return chosen if chosen in THEMES else "system"


async def page(request: Request, engine: EngineDep, template: str, *, status: int = 200,
               current: str | None = None, **values: Any) -> HTMLResponse:
    """A signed-in page: `template` drawn inside the sidebar and the owner's theme; `current`
    is the chat the page shows (marked in the sidebar)."""
    values.setdefault("here", request.url.path)
    return render(template, status=status, csrf=csrf_of(request), theme=theme_of(request),
                  **await _sidebar_values(engine, current), **values)


async def _sidebar_values(engine: EngineDep, current: str | None) -> dict[str, Any]:
    """What the sidebar template reads (`_sidebar_chats.html` and the frame around it)."""
    side: Sidebar = await engine.reads.sidebar()
    return {"groups": grouped(side.kept, date.today()), "restricted": side.restricted,
            "waiting": side.waiting, "desk": side.desk, "side_folders": side.folders,
            "side_tags": side.tags, "current": current,
            "private": privacy_view.kinds(engine.config.limits.temporary_idle_seconds)}


@pages.get("/sidebar")
async def sidebar_chats(engine: EngineDep,
                        current: Annotated[str | None, Query(max_length=200)] = None,
                        here: Annotated[str, Query(max_length=2000)] = "/") -> HTMLResponse:
    """The sidebar's chats alone (`_sidebar_chats.html`), drawn again by the sidebar's script
    after an item's menu or a drop changed one; `current` is the chat the page shows."""
    values = await _sidebar_values(engine, current)
    return HTMLResponse(fragment("_sidebar_chats.html", here=_back(here), **values))


@pages.post("/theme")
async def set_theme(request: Request) -> Response:
    """The theme toggle: light, dark, or the system's; remembered in a cookie for a year."""
    form = await form_of(request)
    chosen = form.get("theme", "")
    if chosen not in THEMES:
        raise Refusal("invalid_theme", 422, f"theme must be one of {', '.join(THEMES)}.")
    answer: Response
    if request.headers.get("x-requested-with") == "fetch":
        answer = JSONResponse({"theme": chosen})
    else:
        answer = RedirectResponse(_back(form.get("back", "/")), status_code=303)
    answer.set_cookie(THEME_COOKIE, chosen, max_age=YEAR, httponly=True, samesite="strict",
                      path="/")
    return answer


def _back(where: str) -> str:
    """Back to the page the form was on: a path of this gateway, never another site."""
    parts = urlsplit(where)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or \
            parts.path.startswith("//"):
        return "/"
    return parts.path + (f"?{parts.query}" if parts.query else "")
