"""Messages sent into a running turn (steers), on the store's side: which waiting messages were
offered to a run, and moving a taken one to the head of its chat's transcript.

A steer is admitted like any message (its event on the path, its own run `admitted`), its
event's meta naming the run that was running (`OFFERED_TO`). When that run takes it, the event
is moved to the head: it gets the next seq, the head as its parent and the taking run's id,
and what was appended after it is hung from its old parent. So the path reads what the turn
said and did before it took the message, then the message, then what the turn says after it.
The event is moved, never copied (its row taken out and written again at its new seq in one
transaction): the message is in the transcript once, whatever happens.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, delete, select, update

from hearth.store.db import now
from hearth.store.errors import SessionNotFound, WriterClaimLost
from hearth.store.runs import RunRow
from hearth.store.schema import runs, sessions, transcript_events
from hearth.store.transcript import ON_PATH, EventRow

OFFERED_TO = "steer_into"  # the meta key of a waiting message: the run it was sent into
TAKEN = "steered"  # the meta key of a taken one: {"into": run, "run": its own, "sent_seq"}
TAKING_KINDS = ("chat", "regenerate")  # the runs that take messages sent into them
_T = transcript_events
_EVENT = select(*(_T.c[name] for name in EventRow.__dataclass_fields__))


def offer_in(conn: Connection, session_key: str) -> str | None:
    """The run a message admitted now is offered to: the one holding the chat's writer claim,
    when it is running and of a kind that takes messages; else None (the message queues)."""
    holder = conn.execute(select(sessions.c.writer_run_id)
                          .where(sessions.c.key == session_key)).scalar()
    if holder is None:
        return None
    run = conn.execute(select(runs.c.status, runs.c.kind).where(runs.c.run_id == holder)).first()
    if run is None or run.status != "running" or run.kind not in TAKING_KINDS:
        return None
    return str(holder)


def offered_meta(meta: dict[str, Any] | None, into: str | None) -> dict[str, Any] | None:
    """A message's meta, marked as sent into `into` when it is offered to a running run."""
    return meta if into is None else {**(meta or {}), OFFERED_TO: into}


def run_of(event: EventRow) -> str | None:
    """The run a message was admitted as (a taken steer's event belongs to the turn that took
    it; its own run is named in `meta.steered`)."""
    steered = event.meta.get(TAKEN)
    if isinstance(steered, dict) and isinstance(steered.get("run"), str):
        return str(steered["run"])
    return event.run_id


def sent_into(event: EventRow | None, run: RunRow | None) -> str | None:
    """The running run a message was sent into: the one that took it, or the one it waits
    for; None for a message that was not sent into a running turn."""
    if event is None:
        return None
    steered = event.meta.get(TAKEN)
    if isinstance(steered, dict):
        return str(steered.get("into"))
    offered_to = event.meta.get(OFFERED_TO)
    if run is not None and run.status == "admitted" and isinstance(offered_to, str):
        return offered_to
    return None


def offered(conn: Connection, session_key: str, run_id: str) -> list[tuple[RunRow, EventRow]]:
    """The chat's messages waiting to be taken by `run_id`: runs still admitted whose event is
    on the path, still their own and marked as sent into `run_id`; oldest first."""
    chat = conn.execute(select(sessions.c.tab_id, sessions.c.generation)
                        .where(sessions.c.key == session_key)).first()
    if chat is None:
        return []
    waiting = conn.execute(select(runs).where(
        runs.c.session_key == session_key, runs.c.status == "admitted").order_by(runs.c.id))
    found = []
    for row in waiting:
        run = RunRow.of(row)
        if run.user_event_seq is None or (run.tab_id, run.generation) != tuple(chat):
            continue  # a message of an earlier incarnation of the chat ends stale on its own
        event = conn.execute(_EVENT.where(_T.c.session_key == session_key,
                                          _T.c.seq == run.user_event_seq, ON_PATH)).first()
        if event is None:
            continue
        message = EventRow.of(event)
        if message.run_id == run.run_id and message.meta.get(OFFERED_TO) == run_id:
            found.append((run, message))
    return found


def move_to_head(conn: Connection, session_key: str, event: EventRow, *, run_id: str,
                 meta: dict[str, Any]) -> EventRow:
    """Move `event` to the head of the chat as `run_id`'s (which must hold the writer claim):
    the next seq, the head as parent, `meta` as its meta; its children are given its parent.
    The row is taken out and written again, the same event in one transaction, so whatever
    follows the table's writes (the search index's triggers) follows the move."""
    head = conn.execute(select(sessions.c.last_seq, sessions.c.head_event_id,
                               sessions.c.writer_run_id)
                        .where(sessions.c.key == session_key)
                        .with_for_update()).first()  # as transcript.append: one at a time
    if head is None:
        raise SessionNotFound(session_key)
    if head.writer_run_id != run_id:
        raise WriterClaimLost(session_key, run_id)
    # read again: a message moved before it in this transaction may have been its parent
    row = dict(conn.execute(select(_T).where(_T.c.session_key == session_key,
                                             _T.c.event_id == event.event_id)).one()._mapping)
    conn.execute(update(_T).where(_T.c.session_key == session_key,
                                  _T.c.parent_event_id == event.event_id)
                 .values(parent_event_id=row["parent_event_id"]))
    if head.head_event_id != event.event_id:
        row["parent_event_id"] = head.head_event_id
    row.update(seq=head.last_seq + 1, run_id=run_id, meta=meta)
    conn.execute(delete(_T).where(_T.c.session_key == session_key,
                                  _T.c.event_id == event.event_id))
    conn.execute(_T.insert(), row)
    conn.execute(update(sessions).where(sessions.c.key == session_key)
                 .values(last_seq=row["seq"], head_event_id=event.event_id, updated_at=now()))
    return replace(event, seq=row["seq"], parent_event_id=row["parent_event_id"],
                   run_id=run_id, meta=meta)
