"""Search across chats, as the surfaces ask for it: the query and its filters checked (a
`Refusal` with a sentence for what cannot be searched), the dates turned into times, one read
of the store's index (`store.search`), and each hit made a view: the chat, the message, a
snippet as plain text with the places of its matched words (`marks`, never markup), and the
first words of an untitled chat. On the first page, the chats whose title holds the query are
listed too (with the same chat filters; not with a date range, which is about messages).

Only persistent chats are ever searched, and by default only what each chat's path says
(`store.search` says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Connection

from hearth.engine.views import iso, sendable_text
from hearth.errors import Refusal
from hearth.store import search as index, sessions as session_store, transcript
from hearth.store.db import Database

MAX_QUERY_CHARS = index.MAX_QUERY_CHARS
MAX_LIMIT = index.MAX_LIMIT
TITLE_MATCHES = 5  # chats whose title matches, on the first page


@dataclass(frozen=True)
class Asked:
    """A search as a surface asks it. `since` and `until` are days in the gateway's own time
    zone, both included."""

    q: str
    folder: str | None = None
    tag: str | None = None
    pinned: bool | None = None
    archived: bool = False
    since: date | None = None
    until: date | None = None
    limit: int = 20
    cursor: str | None = None
    off_path: bool = False


@dataclass(frozen=True)
class SearchHit:
    key: str
    title: str | None
    opening: str | None  # the chat's first words, when it has no title
    seq: int
    kind: str  # user | assistant
    snippet: str  # plain text
    marks: list[tuple[int, int]]  # [start, end) of each matched word in `snippet`
    created_at: float
    off_path: bool
    last_seq: int  # the chat's last seq: where its newest page ends

    def view(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "seq": self.seq, "kind": self.kind,
                "snippet": self.snippet, "marks": [list(m) for m in self.marks],
                "created_at": iso(self.created_at), "off_path": self.off_path}


@dataclass(frozen=True)
class TitleMatch:
    key: str
    title: str
    updated_at: float


@dataclass(frozen=True)
class SearchPage:
    asked: Asked
    hits: list[SearchHit] = field(default_factory=list)
    next_cursor: str | None = None
    titles: list[TitleMatch] = field(default_factory=list)


def checked(asked: Asked) -> Asked:
    """`asked` with its query trimmed; 422 for a query empty or too long, a limit out of
    range, or a date range that ends before it begins."""
    q = " ".join(asked.q.split())
    if not q:
        raise Refusal("invalid_query", 422, "Type something to search for.")
    if len(q) > MAX_QUERY_CHARS:
        raise Refusal("invalid_query", 422,
                      f"A search is at most {MAX_QUERY_CHARS} characters; this one has {len(q)}.")
    if not 1 <= asked.limit <= MAX_LIMIT:
        raise Refusal("invalid_limit", 422, f"limit must be from 1 to {MAX_LIMIT}.")
    if asked.since and asked.until and asked.until < asked.since:
        raise Refusal("invalid_dates", 422,
                      f"The range ends ({asked.until}) before it begins ({asked.since}).")
    return Asked(q, asked.folder or None, (asked.tag or "").strip().lower() or None,
                 asked.pinned, asked.archived, asked.since, asked.until, asked.limit,
                 asked.cursor or None, asked.off_path)


async def search(db: Database, asked: Asked) -> SearchPage:
    """A page of what `asked` finds (checked first: see `checked`)."""
    asked = checked(asked)
    return await db.reading(_search, asked)


def _search(conn: Connection, asked: Asked) -> SearchPage:
    try:
        found = index.search(conn, asked.q, _filters(asked), limit=asked.limit,
                             cursor=asked.cursor)
    except index.BadCursor:
        raise Refusal("invalid_cursor", 422, "That cursor is not one this search handed "
                      "out; start the search again.") from None
    untitled = sorted({hit.session_key for hit in found.hits if not hit.title})
    openings = transcript.openings(conn, untitled) if untitled else {}
    hits = [_hit(hit, openings.get(hit.session_key)) for hit in found.hits]
    titles = [] if asked.cursor or asked.since or asked.until else _titles(conn, asked)
    return SearchPage(asked, hits, found.next_cursor, titles)


def _filters(asked: Asked) -> index.Filters:
    return index.Filters(folder=asked.folder, tag=asked.tag, pinned=asked.pinned,
                         archived=asked.archived, since=_start_of(asked.since),
                         until=_start_of(asked.until + timedelta(days=1) if asked.until else None),
                         off_path=asked.off_path)


def _start_of(day: date | None) -> float | None:
    """The first moment of `day` in the gateway's own time zone, as UNIX seconds."""
    return None if day is None else datetime.combine(day, time.min).timestamp()


def _hit(hit: index.Hit, opening: str | None) -> SearchHit:
    text, marks = marked(hit.snippet)
    return SearchHit(hit.session_key, hit.title, opening, hit.seq, hit.kind, text, marks,
                     hit.created_at, hit.off_path, hit.last_seq)


def marked(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet's plain text, and where each word between the index's marks is in it (a
    mark left open runs to the end; a stray closing mark is dropped)."""
    text: list[str] = []
    marks: list[tuple[int, int]] = []
    length, opened = 0, None
    for char in sendable_text(snippet):
        if char == index.MARK_OPEN:
            opened = length if opened is None else opened
        elif char == index.MARK_CLOSE:
            if opened is not None and length > opened:
                marks.append((opened, length))
            opened = None
        else:
            text.append(char)
            length += 1
    if opened is not None and length > opened:
        marks.append((opened, length))
    return "".join(text), marks


def _titles(conn: Connection, asked: Asked) -> list[TitleMatch]:
    """Kept chats whose title holds the query, under the same chat filters."""
    rows = session_store.list_page(conn, modes=(index.KEPT,), limit=TITLE_MATCHES * 4,
                                   query=asked.q, folder=asked.folder, tag=asked.tag,
                                   archived=asked.archived)
    wanted = asked.q.casefold()
    return [TitleMatch(row.key, row.title, row.updated_at) for row in rows
            if row.title and wanted in row.title.casefold()
            and (asked.pinned is None or row.pinned == asked.pinned)][:TITLE_MATCHES]
