"""Search across chats: what the owner and the agent said in the kept chats, found by words.

**The query.** The owner's words are never passed to FTS5 as its query syntax: each word (or
"quoted phrase") becomes one quoted FTS5 string, all of them required; a word typed with a
trailing `*` (three letters or more before it) matches as a prefix. A query with no letter or
digit in it finds nothing. Accents are folded both ways ("cafe" finds "café").

**SQLite: the FTS5 index** `chat_search` (migration 0013: the user's messages and the answers
of persistent chats only, kept by triggers as messages are appended and deleted). The matches
are read newest first in windows of `WINDOW` messages that pass the filters; each window is
ranked by BM25, then newest first, and paged through before the next, older window. Ranking
every match would cost about 3 µs each (0.6 s for a word said in 170,000 messages); so a
word said in fewer than `WINDOW` messages is ranked over all of them, and a commoner one over
its most recent. Each hit has a snippet whose matched words stand between `MARK_OPEN` and
`MARK_CLOSE` (characters no indexed text holds), made for the page's hits alone.

**PostgreSQL: tsvector and GIN** (migration 0019): each kept message's words, folded as
SQLite's are, in a GIN index, kept by triggers; ranked by `ts_rank`, then newest, and paged by
offset; snippets by `ts_headline` between the same marks.

**Elsewhere: a LIKE scan.** Other databases have no such index; there `search` reads the
messages with LIKE (every term a case-insensitive substring of the text; accents not folded),
newest first, and cuts the snippet in Python. Correct, and slow on a large store.

**The path.** By default only what is on each chat's path is searched (`off_path` false): the
chat as it reads now. An earlier answer kept as a variant, or what an edit or a rewind left
behind, is no longer the conversation, and a hit there would open on a page that does not
show it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, column, func, or_, select, table

from hearth.store.schema import sessions, transcript_events

MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"  # equal to migration 0013's MARKS
MAX_LIMIT = 50
MAX_QUERY_CHARS = 200
MAX_TERMS = 16
WINDOW = 200  # the newest matches ranked together
SNIPPET_TOKENS = 18  # words around the match in a snippet
LIKE_SNIPPET_CHARS = 160
KEPT = "persistent"  # the one mode whose chats are searched
SEARCHED_KINDS = ("user", "assistant")

_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORDY = re.compile(r"[^\W_]")  # a letter or a digit
_CURSOR = re.compile(r"(\d{1,18})\.(\d{1,6})")


class BadCursor(ValueError):
    """A cursor this module did not hand out."""


@dataclass(frozen=True)
class Filters:
    """Which chats and messages a search looks in. `since` and `until` are UNIX seconds
    (`since` included, `until` not); `archived` searches the archived chats instead of the
    others; `off_path` also searches what was left beside the head's path."""

    folder: str | None = None
    tag: str | None = None
    pinned: bool | None = None
    archived: bool = False
    since: float | None = None
    until: float | None = None
    off_path: bool = False


@dataclass(frozen=True)
class Hit:
    session_key: str
    title: str | None
    seq: int
    kind: str  # user | assistant
    snippet: str  # matched words between MARK_OPEN and MARK_CLOSE
    created_at: float
    off_path: bool
    last_seq: int  # the chat's last seq (where its newest page ends)


@dataclass(frozen=True)
class Found:
    hits: list[Hit] = field(default_factory=list)
    next_cursor: str | None = None  # the next page's cursor; None: this was the last


@dataclass(frozen=True)
class Term:
    words: str  # a word, or the words of a phrase, as typed
    prefix: bool = False


def terms_of(query: str) -> list[Term]:
    """The terms of the owner's query: each "quoted phrase" or word; a word ending in `*`
    after three letters or more is a prefix. Terms without a letter or digit are left out."""
    terms: list[Term] = []
    for found in _TERM.finditer(unicodedata.normalize("NFC", query[:MAX_QUERY_CHARS])):
        phrase, word = found.group(1), found.group(2)
        words = phrase if phrase is not None else word.rstrip("*")
        prefix = phrase is None and word.endswith("*") and len(words) >= 3
        if _WORDY.search(words):
            terms.append(Term(words, prefix))
    return terms[:MAX_TERMS]


def match_expression(terms: list[Term]) -> str:
    """The FTS5 query for `terms`: each an FTS5 string (its quotes doubled), all required."""
    return " ".join('"' + t.words.replace('"', '""') + '"' + ("*" if t.prefix else "")
                    for t in terms)


def search(conn: Connection, query: str, filters: Filters, *, limit: int = 20,
           cursor: str | None = None) -> Found:
    """A page of the hits of `query` under `filters`: `limit` (1..MAX_LIMIT) from `cursor`
    (a `next_cursor` handed out before; BadCursor for any other). A query with nothing to
    search for finds nothing."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be 1..{MAX_LIMIT}")
    below, skip = _cursor_of(cursor)
    terms = terms_of(query)
    if not terms:
        return Found()
    if conn.dialect.name == "sqlite":
        return _indexed(conn, terms, filters, limit, below, skip)
    if conn.dialect.name == "postgresql":
        return _postgres(conn, terms, filters, limit, skip)
    return _scanned(conn, terms, filters, limit, skip)


def scan(conn: Connection, query: str, filters: Filters, *, limit: int = 20,
         cursor: str | None = None) -> Found:
    """`search` as a database without FTS5 does it (any database can: the tests run it on
    SQLite)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be 1..{MAX_LIMIT}")
    _below, skip = _cursor_of(cursor)
    terms = terms_of(query)
    return _scanned(conn, terms, filters, limit, skip) if terms else Found()


def _cursor_of(cursor: str | None) -> tuple[int | None, int]:
    """(the window's upper bound, exclusive; how many of its ranked hits come before)."""
    if cursor is None:
        return None, 0
    found = _CURSOR.fullmatch(cursor)
    if found is None:
        raise BadCursor(cursor)
    below = int(found.group(1))
    return (below or None), int(found.group(2))


# ---------------------------------------------------------------- filters


def _chats(conn: Connection, filters: Filters) -> Any:
    """The keys of the chats searched: kept, archived or not, then the chat filters."""
    where = [sessions.c.memory_mode == KEPT, sessions.c.archived.is_(filters.archived)]
    if filters.folder is not None:
        where.append(sessions.c.folder == filters.folder)
    if filters.tag is not None:
        where.append(_has_tag(conn, filters.tag))
    if filters.pinned is not None:
        where.append(sessions.c.pinned.is_(filters.pinned))
    return select(sessions.c.key).where(*where)


def _messages(filters: Filters) -> list[ColumnElement[bool]]:
    events = transcript_events.c
    where: list[ColumnElement[bool]] = []
    if not filters.off_path:
        where.append(events.off_path.is_(False))
    if filters.since is not None:
        where.append(events.created_at >= filters.since)
    if filters.until is not None:
        where.append(events.created_at < filters.until)
    return where


def _has_tag(conn: Connection, tag: str) -> ColumnElement[bool]:
    """The chat's tags hold `tag` (kept lower-cased; JSON, so each dialect's own test)."""
    if conn.dialect.name == "sqlite":
        each = func.json_each(sessions.c.tags).table_valued("value")
        return select(each.c.value).where(each.c.value == tag).exists()
    from sqlalchemy import cast
    from sqlalchemy.dialects.postgresql import JSONB

    return cast(sessions.c.tags, JSONB).contains([tag])


# ---------------------------------------------------------------- SQLite: the FTS5 index
# Written as SQL: this path is SQLite's alone, and building it through SQLAlchemy cost more
# than the statements themselves (about 2 ms a search).

_WINDOW = ("SELECT f.rowid, bm25(chat_search), m.created_at FROM chat_search f "
           "JOIN chat_search_messages m ON m.id = f.rowid "
           "WHERE chat_search MATCH ?{messages} "
           "ORDER BY f.rowid DESC LIMIT ?")
_CHATS = "SELECT key FROM sessions WHERE memory_mode = ? AND archived = ?"
_ARCHIVED = "SELECT key FROM sessions WHERE archived = 1"
_ANY_ARCHIVED = f"{_ARCHIVED} LIMIT 1"
_SNIPPETS = ("SELECT rowid, CASE WHEN rowid IN ({ids}) THEN "
             "snippet(chat_search, 0, ?, ?, '…', ?) END FROM chat_search "
             "WHERE chat_search MATCH ? AND rowid BETWEEN ? AND ?")
_DETAILS = ("SELECT m.id, e.session_key, s.title, e.seq, e.kind, e.created_at, e.off_path, "
            "s.last_seq FROM chat_search_messages m "
            "JOIN transcript_events e ON e.session_key = m.session_key AND e.seq = m.seq "
            "JOIN sessions s ON s.key = m.session_key "
            f"WHERE m.id IN ({{ids}}) AND s.memory_mode = '{KEPT}'")
_AT = "SELECT id, created_at FROM chat_search_messages WHERE id >= ? ORDER BY id LIMIT 1"
_TOP = "SELECT max(id) FROM chat_search_messages"

Ranked = tuple[int, float, float]  # (rowid, rank, created_at)


def _indexed(conn: Connection, terms: list[Term], filters: Filters, limit: int,
             below: int | None, skip: int) -> Found:
    match = match_expression(terms)
    low = None if filters.since is None else _first_id_at(conn, filters.since)
    high = None if filters.until is None else _first_id_at(conn, filters.until)
    if below is not None:
        high = below if high is None else min(high, below)
    ranked = _window(conn, match, filters, low, high)
    next_cursor = None
    if skip + limit < len(ranked):  # this window again, pinned to its newest (ids grow)
        pinned = high if high is not None else max(rowid for rowid, *_ in ranked) + 1
        next_cursor = f"{pinned}.{skip + limit}"
    elif len(ranked) == WINDOW:  # an older window may hold more
        next_cursor = f"{min(rowid for rowid, *_ in ranked)}.0"
    return Found(_hits(conn, match, [r[0] for r in ranked[skip:skip + limit]]), next_cursor)


def _window(conn: Connection, match: str, filters: Filters, low: int | None,
            high: int | None) -> list[Ranked]:
    """The newest WINDOW matches from `low` and under `high` (ids) that pass the filters,
    best first: BM25, then newest. Read from the index alone."""
    chats, params = _chats_clause(conn, filters)
    messages, params = chats, [match, *params]
    for clause, value in ((" AND m.off_path = 0", None if filters.off_path else 0),
                          (" AND m.created_at >= ?", filters.since),
                          (" AND m.created_at < ?", filters.until),
                          (" AND f.rowid >= ?", low), (" AND f.rowid < ?", high)):
        if value is not None:
            messages += clause
            params += [value] if "?" in clause else []
    sql = _WINDOW.format(messages=messages)
    rows = conn.exec_driver_sql(sql, (*params, WINDOW)).fetchall()
    return sorted(((int(r[0]), float(r[1]), stamp_of(r[2])) for r in rows),
                  key=lambda r: (r[1], -r[2], -r[0]))


def stamp_of(value: object) -> float:
    """A stored time as a number to order by: a value that is no finite number (a row a bad
    import or a hand edit left) orders as the oldest, and never fails the search."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _chats_clause(conn: Connection, filters: Filters) -> tuple[str, list[Any]]:
    """The window's test of a match's chat, and its parameters. Only kept chats are in the
    index (its triggers see to it; the hits' details check again), so without a chat filter
    only the archived chats are left out, and only when there are some."""
    chats, params = _CHATS, [KEPT, int(filters.archived)]
    if filters.folder is not None:
        chats, params = chats + " AND folder = ?", [*params, filters.folder]
    if filters.tag is not None:
        chats += " AND EXISTS (SELECT 1 FROM json_each(sessions.tags) WHERE value = ?)"
        params.append(filters.tag)
    if filters.pinned is not None:
        chats, params = chats + " AND pinned = ?", [*params, int(filters.pinned)]
    if chats != _CHATS or filters.archived:
        return f" AND m.session_key IN ({chats})", params
    if conn.exec_driver_sql(_ANY_ARCHIVED).first() is None:
        return "", []
    return f" AND m.session_key NOT IN ({_ARCHIVED})", []


def _first_id_at(conn: Connection, stamp: float) -> int:
    """Where the messages said at `stamp` or later begin among the ids (a binary search):
    every id below it is of an earlier message; past the last id when none is later. Each
    message's own time is still checked, so nothing outside the range is found; where ids
    and times disagree (a clock set back, a steered message moved to the head keeping its
    time), one said just inside a bound may be left out."""
    top = conn.exec_driver_sql(_TOP).scalar()
    low, high = 0, (int(top) + 1 if top is not None else 0)
    while low < high:
        middle = (low + high) // 2
        row = conn.exec_driver_sql(_AT, (middle,)).first()
        if row is None or stamp_of(row[1]) >= stamp:
            high = middle  # no id in [middle, row's id) exists: the same bound
        else:
            low = int(row[0]) + 1
    return low


def _hits(conn: Connection, match: str, ids: list[int]) -> list[Hit]:
    """The hits of `ids`, in that order, with their chat, kind and snippet."""
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    snippets: dict[int, str | None] = dict(conn.exec_driver_sql(
        _SNIPPETS.format(ids=marks),
        (*ids, MARK_OPEN, MARK_CLOSE, SNIPPET_TOKENS, match, min(ids), max(ids))).fetchall())
    found = {int(r[0]): Hit(r[1], r[2], r[3], r[4], str(snippets.get(r[0]) or ""), r[5],
                            bool(r[6]), r[7])
             for r in conn.exec_driver_sql(_DETAILS.format(ids=marks), tuple(ids))}
    return [found[rowid] for rowid in ids if rowid in found]


# ---------------------------------------------------------------- the agent's chat_search

_ANY = ("SELECT m.session_key, m.seq, e.kind, m.created_at, "
        "json_extract(e.content, '$.text') AS text, s.memory_mode, s.title "
        "FROM chat_search f JOIN chat_search_messages m ON m.id = f.rowid "
        "JOIN transcript_events e ON e.session_key = m.session_key AND e.seq = m.seq "
        "JOIN sessions s ON s.key = m.session_key "
        "WHERE chat_search MATCH ? AND m.session_key IS NOT ? "
        "ORDER BY f.rowid DESC LIMIT ?")


def newest_with_any(conn: Connection, words: list[str], exclude_key: str | None,
                    limit: int) -> list[Row[Any]]:
    """The newest `limit` indexed messages (SQLite's index, or PostgreSQL's) holding a word
    that begins with one of `words`, newest first, off the path too, each with its text and
    its chat's mode and title (what `memory.chat_search` ranks); none of `exclude_key`'s."""
    if not words:
        return []
    if conn.dialect.name == "postgresql":
        return _postgres_any(conn, words, exclude_key, limit)
    match = " OR ".join('"' + word.replace('"', '""') + '"*' for word in words)
    return list(conn.exec_driver_sql(_ANY, (match, exclude_key, limit)))


def _postgres_any(conn: Connection, words: list[str], exclude_key: str | None,
                  limit: int) -> list[Row[Any]]:
    index = _PG_INDEX
    events = transcript_events.c
    begun = [index.c.words.op("@@")(_tsquery(Term(word, prefix=True))) for word in words
             if _WORDY.search(word)]
    if not begun:
        return []
    stmt = (select(index.c.session_key, index.c.seq, events.kind, index.c.created_at,
                   events.content["text"].as_string().label("text"), sessions.c.memory_mode,
                   sessions.c.title)
            .select_from(index)
            .join(transcript_events, (events.session_key == index.c.session_key)
                  & (events.seq == index.c.seq))
            .join(sessions, sessions.c.key == index.c.session_key)
            .where(or_(*begun))
            .order_by(index.c.id.desc()).limit(limit))
    if exclude_key is not None:
        stmt = stmt.where(index.c.session_key != exclude_key)
    return list(conn.execute(stmt))


# ---------------------------------------------------------------- PostgreSQL: tsvector + GIN
# The index of migration 0019: each kept message's words folded (hearth_fold: lower case, no
# accents) as a `simple` tsvector. A word is a lexeme of the same folding, a "phrase" its
# words in a row, a `word*` a prefix; all required. Ranked by ts_rank, then newest; a page
# is an offset into that order (the cursor's second part).

# PostgreSQL's index table (migration 0019), outside the schema every engine shares
_PG_INDEX = table("chat_search_messages", column("id"), column("session_key"), column("seq"),
                  column("created_at"), column("off_path"), column("words"))


def _tsquery(term: Term) -> Any:
    folded = func.hearth_fold(term.words)
    if term.prefix:
        return func.to_tsquery("simple", func.concat(func.quote_literal(folded), ":*"))
    return func.phraseto_tsquery("simple", folded)


def _postgres(conn: Connection, terms: list[Term], filters: Filters, limit: int,
              skip: int) -> Found:
    index = _PG_INDEX
    query = _tsquery(terms[0])
    for term in terms[1:]:
        query = query.op("&&")(_tsquery(term))
    events = transcript_events.c
    said = func.hearth_said(events.content)
    options = (f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords={SNIPPET_TOKENS}, "
               "MinWords=6, ShortWord=0, MaxFragments=1, FragmentDelimiter=…")
    rank = func.ts_rank(index.c.words, query)
    where: list[ColumnElement[bool]] = [index.c.words.op("@@")(query),
                                        index.c.session_key.in_(_chats(conn, filters))]
    if not filters.off_path:
        where.append(index.c.off_path.is_(False))
    if filters.since is not None:
        where.append(index.c.created_at >= filters.since)
    if filters.until is not None:
        where.append(index.c.created_at < filters.until)
    stmt = (select(events.session_key, sessions.c.title, events.seq, events.kind,
                   func.ts_headline("simple", said, query, options),
                   events.created_at, events.off_path, sessions.c.last_seq)
            .select_from(index)
            .join(transcript_events, (events.session_key == index.c.session_key)
                  & (events.seq == index.c.seq))
            .join(sessions, sessions.c.key == index.c.session_key)
            .where(*where, sessions.c.memory_mode == KEPT)
            .order_by(rank.desc(), index.c.created_at.desc(), index.c.id.desc())
            .limit(limit + 1).offset(skip))
    rows = conn.execute(stmt).all()
    hits = [Hit(r[0], r[1], r[2], r[3], " ".join(str(r[4] or "").split()), r[5], bool(r[6]),
                r[7]) for r in rows[:limit]]
    return Found(hits, f"0.{skip + limit}" if len(rows) > limit else None)


# ---------------------------------------------------------------- elsewhere: a LIKE scan


def _scanned(conn: Connection, terms: list[Term], filters: Filters, limit: int,
             skip: int) -> Found:
    """Every term a case-insensitive substring of the message's text, newest first."""
    text = transcript_events.c.content["text"].as_string()
    stmt = (select(transcript_events.c.session_key, sessions.c.title, transcript_events.c.seq,
                   transcript_events.c.kind, text, transcript_events.c.created_at,
                   transcript_events.c.off_path, sessions.c.last_seq)
            .join(sessions, sessions.c.key == transcript_events.c.session_key)
            .where(transcript_events.c.kind.in_(SEARCHED_KINDS),
                   transcript_events.c.session_key.in_(_chats(conn, filters)),
                   *_messages(filters),
                   *(text.ilike(f"%{_escaped(t.words)}%", escape="\\") for t in terms))
            .order_by(transcript_events.c.created_at.desc(), transcript_events.c.seq.desc())
            .limit(limit + 1).offset(skip))
    rows = conn.execute(stmt).all()
    hits = [Hit(r[0], r[1], r[2], r[3], cut_snippet(str(r[4]), terms), r[5], bool(r[6]), r[7])
            for r in rows[:limit]]
    return Found(hits, f"0.{skip + limit}" if len(rows) > limit else None)


def _escaped(words: str) -> str:
    return words.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def cut_snippet(text: str, terms: list[Term], width: int = LIKE_SNIPPET_CHARS) -> str:
    """A window of `text` around its first match, each term's occurrences in it marked."""
    flat = " ".join(text.replace(MARK_OPEN, "").replace(MARK_CLOSE, "").split())
    pattern = re.compile("|".join(re.escape(t.words) for t in terms), re.IGNORECASE)
    first = pattern.search(flat)
    start = max(0, (first.start() if first else 0) - width // 3)
    end = min(len(flat), start + width)
    window = pattern.sub(lambda m: f"{MARK_OPEN}{m.group(0)}{MARK_CLOSE}", flat[start:end])
    return ("…" if start else "") + window + ("…" if end < len(flat) else "")
