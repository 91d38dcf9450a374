"""Recovery: what a restart makes of the runs a previous process left behind.

At boot, before serving, and on PostgreSQL whenever a replica finds another dead (its lease ran
out: `store/replicas.py`): a run that cannot be resumed (a call an agent CLI asked for) is
ended `interrupted`; every other run the dead gateway left running counts one more recovery
attempt (durably), and goes back to the head of its chat's queue; a run past
`limits.recovery_attempts` is ended as abandoned instead, and nothing tries it again. Every
ending goes through `endings`.
When a resumed run's turn starts, it settles what the dead process left: a final answer
already written ends it as complete (never written twice); a call recorded started but never
finished is marked `unknown` and NEVER run again (the model is told it may or may not have
taken effect); a finished call's result stands; the answer that was streaming is kept, marked
partial; and a notice says the turn was interrupted by a restart and resumed. A run that was
only waiting for the owner's answer is not counted an attempt and gets no notice: it waits
again on the same approval, however many restarts pass.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import Bus, message_frame
from hearth.engine.turn import endings
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.turn_state import Turn
from hearth.models.types import ToolCall
from hearth.store import approvals, ledger, replicas, runs as run_store, transcript
from hearth.store.db import Database
from hearth.store.replicas import Taken
from hearth.store.transcript import EventRow

UNKNOWN_AFTER_RESTART = (
    "This call was interrupted by a restart after it began, before its result was recorded. "
    "It may or may not have taken effect, and it was not run again."
)
NOT_RUN_AFTER_RESTART = (
    "This call was not run: the gateway restarted before it began. Ask for it again if it is "
    "still needed."
)
RESUMED = "This turn was interrupted by a restart and resumed."


async def take_back(db: Database, bus: Bus, me: str, lease: float, budget: int) -> Taken:
    """Take the runs dead gateways left running (at boot: the previous process's; on
    PostgreSQL, every third of a lease: a dead replica's; see `store/replicas.py`): each
    counts one more attempt and is requeued, or ended abandoned past `budget`; a call an
    agent CLI asked for ends interrupted (its caller is gone)."""
    taken = await db.writing(replicas.take_back, me, lease, budget)
    for run_id, key in taken.gone:
        await db.writing(ledger.mark_unknown, run_id, f"Unknown: {UNKNOWN_AFTER_RESTART}")
        await endings.settle(db, bus, session_key=key, run_id=run_id, show=False,
                             ending=endings.interrupted(UNKNOWN_AFTER_RESTART))
    for run_id, key, attempts in taken.past_budget:
        await endings.settle(db, bus, session_key=key, run_id=run_id,
                             ending=endings.abandoned(attempts))
    return taken


async def resume(turn: Turn) -> Ending | list[ToolCall]:
    """Settle what the dead process left of this run: an ending if nothing is left to do,
    else the calls still waiting on the owner's answer (the turn runs those first). A run
    the stop found only waiting for the owner was interrupted in nothing: it waits again,
    and no notice says otherwise."""
    final, run = await turn.db.reading(_final_and_run, turn.session_key, turn.run_id)
    if final is not None:
        return endings.complete()
    waiting, settled = await turn.db.writing(_answer_open, turn, UNKNOWN_AFTER_RESTART,
                                             NOT_RUN_AFTER_RESTART, True)
    _publish(turn.bus, turn.session_key, settled)
    partial = run.partial_text if run is not None else None
    if waiting and not settled and not partial:
        return waiting
    published = await turn.db.writing(_resumed, turn, partial)
    _publish(turn.bus, turn.session_key, published)
    return waiting


def _final_and_run(conn: Connection, session_key: str,
                   run_id: str) -> tuple[EventRow | None, run_store.RunRow | None]:
    return transcript.find(conn, session_key, f"final:{run_id}"), run_store.get(conn, run_id)


def _resumed(conn: Connection, turn: Turn, partial: str | None) -> list[EventRow]:
    """Keep the answer that was streaming (partial) and say the turn was resumed."""
    published = []
    if partial:
        published.append(transcript.append(
            conn, turn.session_key, "assistant", {"text": partial},
            meta={"finish_reason": "incomplete", "partial": True, "recovered": True},
            run_id=turn.run_id, writer=turn.run_id,
        ))
    run_store.checkpoint(conn, turn.run_id, None)
    published.append(transcript.append(
        conn, turn.session_key, "notice", {"text": RESUMED},
        meta={"recovered": True, "attempt": turn.run.recovery_attempts},
        run_id=turn.run_id, writer=turn.run_id,
    ))
    return published


async def answer_open_calls(turn: Turn, *, unknown: str, not_run: str) -> None:
    """Give every call of this run that has no result one, from the ledger's word on it
    (a turn ended from outside: a call waiting on the owner is answered as not run)."""
    _, appended = await turn.db.writing(_answer_open, turn, unknown, not_run, False)
    _publish(turn.bus, turn.session_key, appended)


def _answer_open(conn: Connection, turn: Turn, unknown: str, not_run: str,
                 keep_requested: bool) -> tuple[list[ToolCall], list[EventRow]]:
    """Every call of the run with no result given one: a call recorded started and never
    ended becomes `unknown` and is answered `unknown`; one that finished keeps its recorded
    result; one the ledger never saw never ran; one waiting on the owner is kept waiting
    (`keep_requested`: returned) or answered as not run. Answers the calls kept waiting and
    the results appended."""
    waiting: list[ToolCall] = []
    ledger.mark_unknown(conn, turn.run_id, receipt=f"Unknown: {unknown}")
    if not keep_requested:
        approvals.cancel_for_run(conn, turn.run_id)
    rows = {c.call_id: c for c in ledger.for_run(conn, turn.run_id)}
    events = transcript.of_run(conn, turn.session_key, turn.run_id,
                               turn.run.user_event_seq or 0)
    answered = {e.content.get("call_id") for e in events if e.kind == "tool_result"}
    appended = []
    for event in events:
        call_id = str(event.content.get("call_id"))
        if event.kind != "tool_call" or call_id in answered:
            continue
        row = rows.get(call_id)
        if row is not None and row.status == "requested":
            if keep_requested:
                waiting.append(ToolCall(call_id, str(event.content["name"]),
                                        dict(event.content.get("arguments") or {})))
                continue
            ledger.record_denied(conn, run_id=turn.run_id, call_id=call_id,
                                 receipt="Not run: the turn ended before the owner answered.")
        content, meta = _result_for(event, row, unknown, not_run)
        appended.append(transcript.append(
            conn, turn.session_key, "tool_result", content, meta=meta,
            run_id=turn.run_id, writer=turn.run_id,
        ))
    return waiting, appended


def _result_for(
    call: EventRow, row: ledger.CallRow | None, unknown: str, not_run: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    base = {"call_id": call.content["call_id"], "name": call.content.get("name", "")}
    if row is None:
        return {**base, "output": not_run, "is_error": True}, {"receipt": "Not run."}
    if row.status == "unknown":
        return {**base, "output": unknown, "is_error": True}, {"receipt": row.receipt}
    if row.status in ("requested", "denied"):
        return ({**base, "output": "This call was not run: the turn ended before the owner "
                 "answered." if row.status == "requested" else
                 "The owner denied this call, so it was not run.", "is_error": True},
                {"receipt": row.receipt or "Not run."})
    return ({**base, "output": row.result or "", "is_error": row.status == "failed"},
            {"receipt": row.receipt, "recovered": True})


def _publish(bus: Bus, session_key: str, events: list[EventRow]) -> None:
    for event in events:
        bus.publish(session_key, message_frame(event))
