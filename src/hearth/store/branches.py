"""The transcript's tree: the head's path, moving the head, variants, the visible list.

Every event's parent is the head when it was appended (`transcript.append`), so a chat is a
tree whose head (`sessions.head_event_id`) picks one path from the first message. Moving the
head (a regenerate, an edit, a rewind, a variant chosen) sets each event's `off_path` in the
same transaction, so the readers of the conversation filter one column instead of walking the
tree; nothing is deleted.

The *visible list* is the user and assistant events on the path, in seq order: the coordinate
(`visible index`, from 0) that edit, rewind, fork and the session map speak. Two siblings (the
same parent) are *variants* of each other: answers to the same message, or a message and its
edit. An attempt that did not complete (a failed or stopped turn run again) is no variant.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, or_, select, text, update
from sqlalchemy.sql.elements import ColumnElement

from hearth.store.runs import RunRow
from hearth.store.schema import runs, sessions, transcript_events
from hearth.store.transcript import ON_PATH, EventRow

VISIBLE = ("user", "assistant")
_EVENT_COLUMNS = [transcript_events.c[name] for name in EventRow.__dataclass_fields__]
_T = transcript_events

# The path from `b_head` to the first message, walked by parent ids (each step one lookup of
# the unique event_id index), and each of the chat's events marked on or off it. The head is
# cast to the column's type: PostgreSQL refuses a recursive term of another type than its seed.
_MARK_PATH = text("""
WITH RECURSIVE path(id) AS (
    SELECT CAST(:b_head AS VARCHAR(64)) WHERE :b_head IS NOT NULL
    UNION ALL
    SELECT e.parent_event_id FROM transcript_events e JOIN path ON e.event_id = path.id
    WHERE e.session_key = :b_key AND e.parent_event_id IS NOT NULL
)
UPDATE transcript_events SET off_path = (event_id NOT IN (SELECT id FROM path))
WHERE session_key = :b_key
""")


@dataclass(frozen=True)
class Variants:
    """Where an event stands among its siblings: `index` (from 0) of `count`, and each
    sibling's event id, oldest first."""

    index: int
    count: int
    siblings: list[str]


def move_head(conn: Connection, session_key: str, event_id: str | None) -> None:
    """Make `event_id` (None: before the first message) the chat's head and mark the path."""
    conn.execute(_MARK_PATH, {"b_head": event_id, "b_key": session_key})
    on_path = conn.execute(select(func.count()).where(_T.c.session_key == session_key, ON_PATH))
    conn.execute(update(sessions).where(sessions.c.key == session_key).values(
        head_event_id=event_id, message_count=on_path.scalar_one()))


def event(conn: Connection, session_key: str, event_id: str) -> EventRow | None:
    row = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, _T.c.event_id == event_id)).first()
    return EventRow.of(row) if row else None


def visible_at(conn: Connection, session_key: str, index: int) -> EventRow | None:
    """The event at `index` of the visible list (None past its end)."""
    if index < 0:
        return None
    row = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.kind.in_(VISIBLE))
        .order_by(_T.c.seq).offset(index).limit(1)).first()
    return EventRow.of(row) if row else None


def visible_before(conn: Connection, session_key: str, seq: int) -> int:
    """How many events of the visible list come before seq `seq`: the visible index of the
    first one at or after it."""
    return int(conn.execute(select(func.count()).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.kind.in_(VISIBLE),
        _T.c.seq < seq)).scalar_one())


def visible_counts(conn: Connection, session_keys: list[str]) -> dict[str, int]:
    """How many messages (yours and the answers, no tool call or notice) each chat's path
    holds; a chat with none is left out."""
    if not session_keys:
        return {}
    rows = conn.execute(select(_T.c.session_key, func.count()).where(
        _T.c.session_key.in_(session_keys), ON_PATH, _T.c.kind.in_(VISIBLE),
    ).group_by(_T.c.session_key))
    return {key: int(count) for key, count in rows}


def last_of_a_run(conn: Connection, session_key: str) -> EventRow | None:
    """The path's last event written by a turn (an answer, or a failed turn's ending)."""
    row = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.run_id.is_not(None),
        _T.c.kind != "user").order_by(_T.c.seq.desc()).limit(1)).first()
    return EventRow.of(row) if row else None


def newer_run(conn: Connection, run: RunRow) -> RunRow | None:
    """The newest run after `run` that answers the same message (a retry already made)."""
    row = conn.execute(select(runs).where(
        runs.c.session_key == run.session_key, runs.c.user_event_seq == run.user_event_seq,
        runs.c.id > run.id).order_by(runs.c.id.desc()).limit(1)).first()
    return RunRow.of(row) if row else None


def visible_count(conn: Connection, session_key: str) -> int:
    """How many events the visible list holds."""
    return int(conn.execute(select(func.count()).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.kind.in_(VISIBLE))).scalar_one())


def path(conn: Connection, session_key: str) -> list[EventRow]:
    """Every event on the head's path, oldest first (the session map's source)."""
    rows = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, ON_PATH).order_by(_T.c.seq))
    return [EventRow.of(row) for row in rows]


def path_through(conn: Connection, session_key: str, seq: int) -> list[EventRow]:
    """The path's events up to seq `seq`, oldest first (what a fork copies)."""
    rows = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.seq <= seq).order_by(_T.c.seq))
    return [EventRow.of(row) for row in rows]


def variants(conn: Connection, session_key: str, events: list[EventRow]
             ) -> dict[str, Variants]:
    """The variants of each of `events` that has any (by event id): its siblings that are a
    message of the owner's or part of an attempt that completed or is running. The first
    messages of a chat (no parent) are siblings of each other."""
    parents = {e.parent_event_id for e in events}
    if not events:
        return {}
    kept = or_(_T.c.kind == "user", runs.c.status.in_(("complete", "running", "admitted")))
    same_parent: ColumnElement[bool] = _T.c.parent_event_id.in_(
        [p for p in parents if p is not None])
    if None in parents:
        same_parent = or_(same_parent, _T.c.parent_event_id.is_(None))
    rows = conn.execute(
        select(_T.c.parent_event_id, _T.c.event_id)
        .select_from(_T.outerjoin(runs, runs.c.run_id == _T.c.run_id))
        .where(_T.c.session_key == session_key, same_parent, kept)
        .order_by(_T.c.seq))
    by_parent: dict[str | None, list[str]] = {}
    for parent, event_id in rows:
        by_parent.setdefault(parent, []).append(event_id)
    found: dict[str, Variants] = {}
    for e in events:
        siblings = by_parent.get(e.parent_event_id, [])
        if len(siblings) > 1 and e.event_id in siblings:
            found[e.event_id] = Variants(siblings.index(e.event_id), len(siblings), siblings)
    starts: dict[str, str] = {}  # run -> its first step among `events`
    for e in events:
        if e.run_id and e.kind != "user":
            starts.setdefault(e.run_id, e.event_id)
    for e in events:  # an answer shows its turn's variants (its first step may be a tool call)
        start = starts.get(e.run_id or "")
        if e.kind == "assistant" and e.event_id not in found and start in found:
            found[e.event_id] = found[start]
    return found


def turn_start(conn: Connection, session_key: str, event: EventRow) -> EventRow:
    """Where an answer's variants are: its turn's first step on the path (a sibling of the
    other answers to the same message); any other event is its own."""
    if event.kind != "assistant" or event.run_id is None:
        return event
    row = conn.execute(select(*_EVENT_COLUMNS).where(
        _T.c.session_key == session_key, ON_PATH, _T.c.run_id == event.run_id,
        _T.c.kind != "user").order_by(_T.c.seq).limit(1)).first()
    return EventRow.of(row) if row else event


def newest_leaf(conn: Connection, session_key: str, event_id: str) -> str:
    """The newest event of the subtree under `event_id` (itself when it has no children): where
    the head goes when that variant is chosen, so its own continuation comes back with it."""
    found = conn.execute(text("""
        WITH RECURSIVE below(id, seq) AS (
            SELECT event_id, seq FROM transcript_events
            WHERE session_key = :b_key AND event_id = :b_id
            UNION ALL
            SELECT e.event_id, e.seq FROM transcript_events e JOIN below
              ON e.parent_event_id = below.id AND e.session_key = :b_key
        )
        SELECT id FROM below ORDER BY seq DESC LIMIT 1
    """), {"b_key": session_key, "b_id": event_id}).scalar_one()
    return str(found)
