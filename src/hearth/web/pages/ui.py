"""What every dashboard page shares: the Jinja2 environment (autoescaped; answers rendered as
sanitized Markdown), rendering, reading a posted form, the page's CSRF token, and the nav.

The environment is made at the first page drawn (`templates()`): a gateway that serves only
the API never imports Jinja2 or markdown-it."""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse

from hearth.engine.views import UNREADABLE, moment
from hearth.sessions.naming import shown_name
from hearth.web.http import signin
from hearth.web.http.static_files import asset_url
from hearth.web.pages import markdown
from hearth.web.pages.icons import icon

if TYPE_CHECKING:
    from jinja2 import Environment

HERE = Path(__file__).parent.parent  # web/: its templates/ and static/
STATIC = HERE / "static"
NAV = (("/approvals", "Approvals", "shield"), ("/desk", "Not delivered", "inbox"),
       ("/jobs", "Jobs", "clock"),
       ("/memory", "Memory", "memory"), ("/usage", "Usage", "chart"),
       ("/settings", "Settings", "gear"))


def utc(stamp: object, shape: str = "%Y-%m-%d %H:%M") -> str:
    """A UNIX time as a UTC date and time (`shape` "iso" for a `<time datetime>`); "unreadable"
    for a stored time that is none (`engine.views.moment`)."""
    found = moment(stamp)
    if found is None:
        return UNREADABLE
    return found.isoformat() if shape == "iso" else found.strftime(shape)



def local(stamp: object) -> str:
    """A UNIX time in the gateway's own time zone, short: "14:05" today, else "3 Nov 2026";
    "unreadable" for a stored time that is none."""
    found = in_local_zone(moment(stamp))
    if found is None:
        return UNREADABLE
    if found.date() == datetime.now().date():
        return found.strftime("%H:%M")
    return f"{found.day} {found.strftime('%b %Y')}"


def in_local_zone(found: datetime | None) -> datetime | None:
    """A time in the gateway's own zone; None for none, or one at the calendar's very edge
    that the zone's offset carries past it."""
    if found is None:
        return None
    try:
        return found.astimezone()
    except (OverflowError, OSError, ValueError):
        return None


@functools.cache
def templates() -> Environment:
    """The pages' Jinja2 environment, made once, at the first page drawn."""
    from jinja2 import Environment, FileSystemLoader

    made = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
    made.globals.update(markdown=markdown.render, icon=icon, nav=NAV, shown_name=shown_name,
                        asset=functools.partial(asset_url, STATIC))
    made.filters.update(utc=utc, local=local)
    return made


def render(name: str, status: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(templates().get_template(name).render(**values), status_code=status)


def fragment(name: str, **values: Any) -> str:
    """A partial template rendered to a string (the same one a page includes)."""
    return templates().get_template(name).render(**values)


async def form_of(request: Request) -> dict[str, str]:
    """A posted form's fields (the first of each name). A browser sends a textarea's line
    breaks as CRLF; they are kept as the LF every other client sends."""
    raw = (await request.body()).decode("utf-8", "replace")
    return {k: v[0].replace("\r\n", "\n") for k, v in parse_qs(raw).items()}


def csrf_of(request: Request) -> str:
    return signin.csrf_for(request.app.state.token, request.cookies.get(signin.COOKIE, ""))
