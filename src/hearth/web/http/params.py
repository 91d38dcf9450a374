"""What a request may ask that the API and the pages read one way: a search's parameters
(`asked_of`: `GET /api/search` and the search page), a span of days (`span_of`: the usage
API and page), and what a memory item the owner teaches may be (`Kind`, `MAX_TEXT`: the
memory API and page). A value that cannot be used is refused (422) saying which."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Literal

from hearth.engine.operations import search as chat_search
from hearth.engine.operations.search import Asked
from hearth.errors import Refusal

CHOICE = {"": None, "1": True, "true": True, "0": False, "false": False}
DEFAULT_LIMIT = 20
Kind = Literal["fact", "preference", "lesson", "commitment"]  # store.memory.KINDS
MAX_TEXT = 2000  # characters of a memory item's words


def asked_of(q: str, *, folder: str | None = None, tag: str | None = None,
             pinned: str | None = None, archived: str | None = None, since: str | None = None,
             until: str | None = None, limit: str | None = None, cursor: str | None = None,
             off_path: str | None = None) -> Asked:
    """A search from a request's parameters (an empty one is one left out); 422 for a value
    that cannot be used. The engine checks the rest (`engine.operations.search.checked`)."""
    return Asked(q, folder=folder or None, tag=tag or None, pinned=_choice("pinned", pinned),
                 archived=bool(_choice("archived", archived)), since=_day("since", since),
                 until=_day("until", until), limit=_limit(limit), cursor=cursor or None,
                 off_path=bool(_choice("off_path", off_path)))


def span_of(days: int, today: date) -> list[str]:
    """The last `days` days up to today, oldest first, as 'YYYY-MM-DD'."""
    return [(today - timedelta(days=back)).isoformat() for back in range(days - 1, -1, -1)]


def _choice(name: str, value: str | None) -> bool | None:
    if (value or "").lower() not in CHOICE:
        raise Refusal("invalid_request", 422, f"{name} must be 1 or 0 (or left empty).")
    return CHOICE[(value or "").lower()]


def _day(name: str, value: str | None) -> date | None:
    if not value:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise Refusal("invalid_request", 422,
                      f"{name} must be a date as YYYY-MM-DD, like 2026-03-01.") from None


def _limit(value: str | None) -> int:
    if not value:
        return DEFAULT_LIMIT
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= chat_search.MAX_LIMIT:
        raise Refusal("invalid_limit", 422,
                      f"limit must be a whole number from 1 to {chat_search.MAX_LIMIT}.")
    return int(value)
