"""Steering: a message sent into a running turn is read by that turn at its next step.

Offered at admission: when the chat's running turn can take messages (a chat's turn, not a
job's or an agent CLI's call, and not being stopped: `may_steer`), a message sent to the chat
is admitted as a steer. It is admitted as any message is (its event and its own run, `admitted`,
written before the `202`, which says `steered`), its event marked with the running run
(`store.steers.OFFERED_TO`), so it is in the chat's durable queue like any queued message.

Taken at the next step (`take`): before each of its model calls after the first, the running
turn takes the messages offered to it, in one writer transaction: the answer streamed so far,
if any is not yet kept, is settled first (kept as its own message); each message's event is
moved to the head of the transcript, made the turn's own and marked `meta.steered` (so the
conversation, and the model, read it after what the turn said and did before it took it); and
the message's own run ends `steered`, its `user_event_seq` at the moved event. The live stream
then shows the message where it was taken (a `message` frame, and the run's `done`).

A message the turn does not take runs as the chat's next queued turn, once: the turn ended
before another step (its model answered with no tool call, it was stopped, it failed, the
gateway died). A run is either taken (ended, in the transaction that moves its message) or
still admitted, never both, so nothing is answered twice or lost. Recovery needs nothing of its
own: a message taken before a crash is the resumed turn's (its context reads it; its own run is
ended and never runs); one not yet taken is still admitted, taken by the resumed turn at its
next step or run after it. Taking a message touches neither the ledger nor what was shown, so
it never makes a turn move to another model or run a step again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection

from hearth.engine.delivery.events import message_frame
from hearth.engine.turn import context, endings
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.turn_state import Turn
from hearth.faults import crash_point
from hearth.models.types import Message
from hearth.store import runs as run_store, steers, transcript
from hearth.store.transcript import EventRow

SETTLED_META = {"finish_reason": "incomplete", "partial": True, "cut_off": "steered"}


def may_steer(turn: Turn | None) -> bool:
    """Whether a message sent now may be sent into the chat's running turn: not when that
    turn is being ended (Stop, a time limit). Which run, if any, admission reads from the
    store (`store.steers.offer_in`: the writer, running, of a kind that takes messages)."""
    return turn is None or turn.halt is None


@dataclass(frozen=True)
class Taken:
    """What one take wrote: the settled answer (if any) and the moved messages, in order, and
    each taken message's own run with the ending written on it."""

    events: list[EventRow] = field(default_factory=list)
    ended: list[tuple[str, Ending]] = field(default_factory=list)
    settled: str = ""


async def take(turn: Turn) -> list[Message]:
    """Take the messages sent into this turn and waiting for it; what the model reads next
    (the answer so far when it was settled now, then each message), or [] when none waits."""
    if not await turn.db.reading(steers.offered, turn.session_key, turn.run_id):
        return []
    taken = await turn.db.writing(_take_in, turn.session_key, turn.run_id, turn.streamed)
    if not taken.ended:
        return []
    crash_point("steer_taken")
    if turn.context_cache is not None:  # messages moved: the next turn reads the chat again
        turn.context_cache.drop(turn.session_key)
    if taken.settled:
        turn.streamed = ""
        turn.checkpointed = False
    for event in taken.events:
        turn.bus.publish(turn.session_key, message_frame(event))
    for run_id, ending in taken.ended:
        endings.told(turn.bus, turn.session_key, run_id, ending)
    turn.touch()
    said = [Message("assistant", taken.settled)] if taken.settled else []
    return [*said, *context.fold([e for e in taken.events if e.kind == "user"])]


def _take_in(conn: Connection, session_key: str, run_id: str, streamed: str) -> Taken:
    """In one transaction: the answer so far kept, each waiting message moved to the head as
    this run's, and its own run ended `steered`."""
    waiting = steers.offered(conn, session_key, run_id)
    if not waiting:
        return Taken()
    events: list[EventRow] = []
    if streamed:  # kept first, so the message follows what the turn had said before it
        events.append(transcript.append(conn, session_key, "assistant", {"text": streamed},
                                        meta=dict(SETTLED_META), run_id=run_id,
                                        writer=run_id))
        run_store.checkpoint(conn, run_id, None)
    ended: list[tuple[str, Ending]] = []
    for own, event in waiting:
        meta = {**event.meta, steers.TAKEN: {"into": run_id, "run": own.run_id,
                                             "sent_seq": event.seq}}
        moved = steers.move_to_head(conn, session_key, event, run_id=run_id, meta=meta)
        run_store.set_user_event_seq(conn, own.run_id, moved.seq)
        ending = endings.ended_in(conn, session_key, own.run_id, endings.steered(run_id))
        if ending is not None:
            events.append(moved)
            ended.append((own.run_id, ending))
    return Taken(events, ended, streamed)
