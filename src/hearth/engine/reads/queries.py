"""Read-only questions the surfaces ask of the engine's records: a run's status and receipts,
the page a reconnecting stream replays, the run holding a chat and which wait behind it, the
approvals pending in a chat, and which chat a run or an approval belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import Frame, done_frame, message_frame
from hearth.engine.turn.approvals import approval_view
from hearth.engine.views import run_view
from hearth.store import approvals, ledger, runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.transcript import EventRow


async def run_status(db: Database, run_id: str) -> dict[str, Any] | None:
    return await db.reading(_run_status, run_id)


def _run_status(conn: Connection, run_id: str) -> dict[str, Any] | None:
    run = run_store.get(conn, run_id)
    return None if run is None else run_view(run, ledger.for_run(conn, run_id))


@dataclass(frozen=True)
class Replay:
    """One page of what a stream reconnecting after a seq missed."""

    frames: list[Frame]
    last: int  # the seq read up to: the next page starts after it
    more: bool  # the page was full: read on
    ended: frozenset[str]  # the runs whose `done` it holds (the live stream skips them)


async def replay_page(db: Database, session_key: str, after_seq: int, limit: int) -> Replay:
    """Up to `limit` persisted messages with seq > `after_seq`, each followed by the `done` of
    every run that ended at its seq, read in one snapshot. A run ended at a seq the client
    had seen (<= `after_seq`) counts as seen; one ending after this read is the live bus's."""
    return await db.reading(_replay_page, session_key, after_seq, limit)


def _replay_page(conn: Connection, session_key: str, after_seq: int, limit: int) -> Replay:
    session = session_store.get(conn, session_key)
    if session is None:
        return Replay([], after_seq, False, frozenset())
    events = transcript.after(conn, session_key, after_seq, limit)
    last = events[-1].seq if events else after_seq
    ended = run_store.ended_between(conn, session_key, session.tab_id, after_seq, last)
    return Replay(_in_order(events, ended), last, len(events) == limit,
                  frozenset(run.run_id for run in ended))


def _in_order(events: list[EventRow], ended: list[RunRow]) -> list[Frame]:
    """Messages by seq, each run's `done` right after the message it ended at."""
    frames: list[Frame] = []
    waiting = iter(ended)
    run = next(waiting, None)
    for event in events:
        while run is not None and (run.ended_seq or 0) < event.seq:
            frames.append(_done(run))
            run = next(waiting, None)
        frames.append(message_frame(event))
    while run is not None:
        frames.append(_done(run))
        run = next(waiting, None)
    return frames


def _done(run: RunRow) -> Frame:
    return done_frame(run.run_id, run.status, run.ending or "", run.sentence or "")


async def current_run(db: Database, session_key: str) -> str | None:
    run = await db.reading(run_store.current, session_key)
    return run.run_id if run else None


def _queued(conn: Connection, key: str, run_ids: set[str]) -> tuple[str | None, set[str]]:
    """The run holding the chat, and which of these runs wait behind it (admitted)."""
    session = session_store.get(conn, key)
    running = session.writer_run_id if session is not None else None
    if running is None:
        return None, set()
    runs = (run_store.get(conn, r) for r in run_ids)
    return running, {run.run_id for run in runs if run is not None and run.status == "admitted"}


async def of_chat(db: Database, key: str, run_ids: set[str]
                  ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
    """The run holding the chat, which of `run_ids` wait behind it, and the chat's pending
    approvals (as `engine.turn.approvals.approval_view` shows them)."""
    return await db.reading(_of_chat, key, run_ids)


def _of_chat(conn: Connection, key: str, run_ids: set[str]
             ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
    running, queued = _queued(conn, key, run_ids)
    pending = [approval_view(a) for a in approvals.pending(conn) if a.session_key == key]
    return running, queued, pending


async def is_queued(db: Database, key: str, run_id: str | None) -> bool:
    """A message waits behind another turn: its run is admitted and another holds the chat."""
    if run_id is None:
        return False
    _, queued = await db.reading(_queued, key, {run_id})
    return run_id in queued


async def approval_chat(db: Database, approval_id: str) -> str | None:
    """The key of the chat an approval was asked in; None when there is no such approval."""
    row = await db.reading(approvals.get, approval_id)
    return None if row is None else row.session_key


async def run_chat(db: Database, run_id: str) -> str | None:
    """The key of the chat a run belongs to; None when there is no such run."""
    run = await db.reading(run_store.get, run_id)
    return None if run is None else run.session_key
