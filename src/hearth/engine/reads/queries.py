"""Read-only questions the surfaces ask of the engine's records: a run's status and receipts
(with its answer, when asked), the page a reconnecting stream replays (each ended run's
`done` with its answer), the run holding a chat and which wait behind it, the approvals
pending in a chat, and which chat a run or an approval belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import Answer, Frame, answer_in, done_frame, message_frame
from hearth.engine.turn.approval.desk import approval_view
from hearth.engine.views import event_text, message_view, run_view, sendable_text
from hearth.store import approvals, ledger, runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.transcript import EventRow


async def run_status(db: Database, run_id: str, with_message: bool = False
                     ) -> dict[str, Any] | None:
    """A run's view with its tool calls; with `with_message`, also its `message`: the view of
    its answer once it has ended (its last assistant message; null while it runs, and when it
    wrote none: its `sentence` says why)."""
    return await db.reading(_run_status, run_id, with_message)


async def run_state(db: Database, run_id: str) -> str | None:
    """The run's status alone, None when there is no such run."""
    return await db.reading(run_store.status_of, run_id)


def _run_status(conn: Connection, run_id: str, with_message: bool) -> dict[str, Any] | None:
    run = run_store.get(conn, run_id)
    if run is None:
        return None
    view = run_view(run, ledger.for_run(conn, run_id))
    if with_message:
        answer = _answer_event(conn, run) if run.ended else None
        view["message"] = None if answer is None else message_view(answer)
    return view


def _answer_event(conn: Connection, run: RunRow) -> EventRow | None:
    return transcript.answer_of(conn, run.session_key, run.run_id, run.user_event_seq or 0,
                                MAX_SEQ if run.ended_seq is None else run.ended_seq)


MAX_SEQ = 2**62


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
    messages = [message_frame(event) for event in events]
    answers = _answers(conn, messages, ended)
    return Replay(_in_order(messages, ended, answers), last, len(events) == limit,
                  frozenset(run.run_id for run in ended))


def _answers(conn: Connection, messages: list[Frame], ended: list[RunRow]
             ) -> dict[str, Answer]:
    """The answer of each run ended in the page: from the page's messages when it is there
    (the run's last answer in it, at or before the seq it ended at), else from the store."""
    found: dict[str, Answer] = {}
    for frame in messages:
        answer = answer_in(frame)
        if answer is not None:
            found[str(frame["run_id"])] = answer
    for run in ended:
        answer = found.get(run.run_id)
        if answer is None or answer[0] > (run.ended_seq or 0):
            event = _answer_event(conn, run)
            if event is not None:
                found[run.run_id] = (event.seq, sendable_text(event_text(event)))
    return found


def _in_order(messages: list[Frame], ended: list[RunRow], answers: dict[str, Answer]
              ) -> list[Frame]:
    """Messages by seq, each run's `done` right after the message it ended at."""
    frames: list[Frame] = []
    waiting = iter(ended)
    run = next(waiting, None)
    for message in messages:
        while run is not None and (run.ended_seq or 0) < message["seq"]:
            frames.append(_done(run, answers))
            run = next(waiting, None)
        frames.append(message)
    while run is not None:
        frames.append(_done(run, answers))
        run = next(waiting, None)
    return frames


def _done(run: RunRow, answers: dict[str, Answer]) -> Frame:
    return done_frame(run.run_id, run.status, run.ending or "", run.sentence or "",
                      answers.get(run.run_id))


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
    approvals (as `engine.turn.approval.desk.approval_view` shows them)."""
    return await db.reading(_of_chat, key, run_ids)


def _of_chat(conn: Connection, key: str, run_ids: set[str]
             ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
    running, queued = _queued(conn, key, run_ids)
    return running, queued, _pending_of(conn, key)


async def pending_of(db: Database, key: str) -> list[dict[str, Any]]:
    """The chat's approvals still waiting for an answer (as `approval_view` shows them)."""
    return await db.reading(_pending_of, key)


def _pending_of(conn: Connection, key: str) -> list[dict[str, Any]]:
    return [approval_view(a) for a in approvals.pending(conn) if a.session_key == key]


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
