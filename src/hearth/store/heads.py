"""A chat's head as it stands, and what was written after a seq: what a cache of a chat's
recent context (`engine.turn.context_cache`) checks itself against before each turn.

`stamp` is one primary-key read of the chat's row (its generation, `tab_id`, head, last seq
and how many events its path holds), one index read of its newest context summary's id, and
a count of its events on the events' primary key (the index alone, no row read: an event
deleted by any path shows in it).
`since` reads the events written after a seq, on the head's path or not, with whether each
is on it: a range of the primary key, so its cost is what was written since, whatever the
chat's length.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, func, select

from hearth.store.schema import context_summaries, sessions, transcript_events
from hearth.store.transcript import EventRow


@dataclass(frozen=True)
class Stamp:
    """What the chat's row says now: who it is (generation, tab_id), where its head is,
    how many events it has had (last_seq), holds on its path (message_count) and holds at
    all (events), and its newest context summary (summary_id, 0 when none)."""

    generation: int
    tab_id: str
    head_event_id: str | None
    last_seq: int
    message_count: int
    summary_id: int
    events: int

    def same_chat(self, other: Stamp) -> bool:
        """The same incarnation of the chat with the same summaries (no reset, no replace,
        no summary written since)."""
        return (self.generation, self.tab_id, self.summary_id) == (
            other.generation, other.tab_id, other.summary_id)


_NEWEST_SUMMARY = (
    select(func.coalesce(func.max(context_summaries.c.id), 0))
    .where(context_summaries.c.session_key == bindparam("b_key"))
    .scalar_subquery()
)
_EVENTS = (
    select(func.count()).select_from(transcript_events)
    .where(transcript_events.c.session_key == bindparam("b_key"))
    .scalar_subquery()
)
_STAMP = select(
    sessions.c.generation, sessions.c.tab_id, sessions.c.head_event_id, sessions.c.last_seq,
    sessions.c.message_count, _NEWEST_SUMMARY, _EVENTS,
).where(sessions.c.key == bindparam("b_key"))
_SINCE = (
    select(*(transcript_events.c[name] for name in EventRow.__dataclass_fields__),
           transcript_events.c.off_path)
    .where(transcript_events.c.session_key == bindparam("b_key"),
           transcript_events.c.seq > bindparam("b_after"))
    .order_by(transcript_events.c.seq)
)


def stamp(conn: Connection, session_key: str) -> Stamp | None:
    """The chat's stamp now (None: there is no such chat)."""
    row = conn.execute(_STAMP, {"b_key": session_key}).first()
    return Stamp(*row) if row is not None else None


def since(conn: Connection, session_key: str, after_seq: int) -> list[tuple[EventRow, bool]]:
    """Every event with seq > after_seq, oldest first, each with whether it is off the head's
    path."""
    width = len(EventRow.__dataclass_fields__)
    rows = conn.execute(_SINCE, {"b_key": session_key, "b_after": after_seq})
    return [(EventRow.of(tuple(row)[:width]), bool(row[width])) for row in rows]
