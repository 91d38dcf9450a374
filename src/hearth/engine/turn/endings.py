"""How a turn ended: one code, one outcome and one sentence per way, written once.

Every ending code the engine can write is in `CODES` (docs/troubleshooting.md's endings
table lists each); an `Ending` with any other code or outcome cannot be made.

`settle` records the ending on the run (with the seq it ended at, so a reconnecting stream can
replay its `done`), shows it on the turn (a notice row for every ending but `complete`), gives
the session back (the writer claim) and publishes `done`, in that order; the row of the turn's
last model call (`models.calls.held_calls`) is written in the same transaction.
The sentence is masked once there (`hearth.masking`), so the run, the notice and the `done`
frame say the same thing and none of them a key a provider's error repeated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from hearth.engine.delivery.events import Bus, done_frame, message_frame
from hearth.masking import mask
from hearth.models.calls import write_in
from hearth.models.registry import NO_MODEL_SENTENCE
from hearth.store import approvals, runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.errors import AlreadyAppended, SessionNotFound
from hearth.store.model_calls import CallRow
from hearth.store.transcript import EventRow

CODES = frozenset({
    "complete", "no_model", "cut_off", "model_error", "output_cap", "no_answer",
    "model_call_limit", "tool_call_limit", "stale", "interrupted", "abandoned", "stopped",
    "connection_lost", "no_progress", "time_limit", "internal_error", "steered",
    "store_lost", "spending_limit", "key_missing",
})
OUTCOMES = frozenset(run_store.FINAL)


@dataclass(frozen=True)
class Ending:
    code: str  # one of CODES
    outcome: str  # the run's final status: complete | error | stopped | abandoned
    sentence: str

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"{self.code!r} is not an ending code (endings.CODES)")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"{self.outcome!r} is not a final outcome")


def complete(sentence: str = "The agent answered.") -> Ending:
    """The run did what it was for (`sentence`: what, when it is not a turn's answer)."""
    return Ending("complete", "complete", sentence)


def no_model() -> Ending:
    return Ending("no_model", "error", NO_MODEL_SENTENCE)


def cut_off(sentence: str) -> Ending:
    return Ending(
        "cut_off", "error",
        f"{sentence} What arrived is kept above, marked partial. Send the message again to retry.",
    )


def model_error(sentence: str) -> Ending:
    return Ending("model_error", "error", f"The model call failed: {sentence}")


def key_missing(sentence: str) -> Ending:
    """A model whose key is not in the gateway's environment: a set-up mistake, never the
    model failing (no breaker counts it), so the fix is named and no retry suggested."""
    return Ending("key_missing", "error", f"Nothing was sent to the model. {sentence}")


def output_cap(tokens: int | None) -> Ending:
    cap = f" ({tokens:,} tokens)" if tokens else ""
    return Ending(
        "output_cap", "error",
        f"The model ran out of output room before it answered{cap}. Ask for a shorter answer, "
        "or raise max_output_tokens for this model.",
    )


def models_failed(account: str) -> Ending:
    """Every model the turn could run on failed before it answered; `account` names each."""
    return Ending("model_error", "error",
                  f"No model could answer: {account}. Send the message again to retry.")


def not_moved(ending: Ending, step: str) -> Ending:
    """The model failed after a step that may have changed something: the turn stays ended
    rather than move to another model, which could repeat the step."""
    return replace(ending, sentence=(
        f"{ending.sentence} The turn was not moved to another model: the step “{step}” "
        "may have changed something, and another model could repeat it."))


def capped_notice(model_id: str, tokens: int | None) -> str:
    """The notice under an answer its model stopped at its output cap (the turn completes)."""
    cap = f" ({tokens:,} tokens)" if tokens else ""
    return (f"This answer stopped at {model_id}'s output cap{cap}, so it may be unfinished. "
            f"To allow longer answers, raise max_output_tokens for {model_id} in config.toml "
            "or on the Settings page.")


def no_answer(steps: int) -> Ending:
    if steps:
        noun = "step" if steps == 1 else "steps"
        return Ending(
            "no_answer", "error",
            f"The agent ran {steps} {noun} but did not write an answer.",
        )
    return Ending("no_answer", "error", "The model wrote no answer.")


def spending_limit(sentence: str) -> Ending:
    """A model call that would have passed a spending limit was not made (`sentence`, from
    `models.spending`: the limit, what was spent, when it resets)."""
    return Ending("spending_limit", "error", sentence)


def model_call_limit(limit: int) -> Ending:
    return Ending(
        "model_call_limit", "error",
        f"This turn was stopped after {limit} model calls, the most one turn may make "
        "(limits.max_model_calls_per_turn). What it did is above; send a message to carry on.",
    )


def tool_call_limit(limit: int) -> Ending:
    return Ending(
        "tool_call_limit", "error",
        f"This turn was stopped at {limit} tool calls, the most one turn may make "
        "(limits.max_tool_calls_per_turn). What it did is above; send a message to carry on.",
    )


def stale(reason: str) -> Ending:
    return Ending("stale", "error", f"This message was not run: {reason}")


def interrupted(sentence: str) -> Ending:
    """A run a restart cannot resume (a call an agent CLI asked for: the CLI has gone), ended
    at boot; `sentence` says what became of its work."""
    return Ending("interrupted", "error", sentence)


def abandoned(attempts: int) -> Ending:
    return Ending(
        "abandoned", "abandoned",
        f"This turn was interrupted by {attempts} restarts in a row, so Hearth gave up on it "
        "rather than try again. What it did is above; the chat is free for your next message.",
    )


def steered(into: str) -> Ending:
    """A message sent into a running turn, which took it at its next step (engine.turn.steering):
    its own run ends here, and the turn it was sent into answers it."""
    return Ending("steered", "complete",
                  f"This message was sent into the turn running then ({into}), which read it "
                  "at its next step; that turn's answer is the reply.")


def stopped(sentence: str = "You stopped this turn.") -> Ending:
    return Ending("stopped", "stopped", sentence)


def connection_lost(sentence: str, tries: int) -> Ending:
    return Ending(
        "connection_lost", "error",
        f"The connection to the model was lost before it answered ({sentence}); the message "
        f"was sent {tries} times. Send it again to retry.",
    )


def connection_lost_after_steps(steps: int) -> Ending:
    noun = "step" if steps == 1 else "steps"
    return Ending(
        "connection_lost", "error",
        f"The connection to the model closed after {steps} {noun} of this turn that may have "
        "changed something, so your message was not sent again: that could repeat them. "
        "Send it again to retry.",
    )


def idle(minutes: float, steps: int) -> Ending:
    noun = "step" if steps == 1 else "steps"
    return Ending(
        "no_progress", "error",
        f"This turn was stopped after {minutes:g} minutes with no progress, {steps} {noun} in. "
        "What it did is above, and the chat is free for your next message.",
    )


def time_limit(seconds: float) -> Ending:
    return Ending(
        "time_limit", "error",
        f"The agent did not finish within the turn's time limit ({seconds:g} s), so the turn "
        "was stopped. What it did is above; its late answer is dropped.",
    )


def store_lost() -> Ending:
    return Ending(
        "store_lost", "error",
        "The database could not be reached while this turn ran, so it ended; what it wrote "
        "before is kept. Send the message again once Hearth answers.",
    )


def internal(error: BaseException) -> Ending:
    return Ending(
        "internal_error", "error",
        f"The turn failed inside Hearth ({type(error).__name__}); the gateway log has the "
        "details. Send the message again to retry.",
    )


async def settle(
    db: Database, bus: Bus, *, session_key: str, run_id: str, ending: Ending, show: bool = True,
    calls: Sequence[CallRow] = (),
) -> bool:
    """Write the ending once (a promise), with the rows of `calls` (the turn's model calls
    not written yet), then tell the chat's streams. Returns False when the run had already
    ended."""
    ending = replace(ending, sentence=mask(ending.sentence))
    ended, notice = await db.writing(_write_ending, session_key, run_id, ending, show,
                                     tuple(calls))
    if not ended:
        return False
    if notice is not None:
        bus.publish(session_key, message_frame(notice))
    bus.end_stream(session_key)
    bus.publish(session_key,
                done_frame(run_id, ending.outcome, ending.code, ending.sentence))
    bus.run_ended(run_id)
    return True


def ended_in(conn: Connection, session_key: str, run_id: str, ending: Ending) -> Ending | None:
    """Write the ending of a run that holds nothing of the chat (a message another turn took)
    in the caller's transaction, with no notice; the ending as written (publish it with
    `told` once committed), or None when the run had already ended."""
    ending = replace(ending, sentence=mask(ending.sentence))
    ended, _ = _write_ending(conn, session_key, run_id, ending, False)
    return ending if ended else None


def told(bus: Bus, session_key: str, run_id: str, ending: Ending) -> None:
    """Publish the `done` of a run ended by `ended_in` (the chat's stream goes on)."""
    bus.publish(session_key, done_frame(run_id, ending.outcome, ending.code, ending.sentence))
    bus.run_ended(run_id)


def _write_ending(conn: Connection, session_key: str, run_id: str, ending: Ending,
                  show: bool, calls: tuple[CallRow, ...] = ()) -> tuple[bool, EventRow | None]:
    write_in(conn, calls)  # bookkeeping: a row that cannot be written never fails the ending
    if not run_store.finish(
        conn, run_id, status=ending.outcome, ending=ending.code, sentence=ending.sentence
    ):
        return False, None
    notice = None
    if show and ending.code != "complete":
        try:
            notice = transcript.append(
                conn, session_key, "notice", {"text": ending.sentence},
                meta={"ending": ending.code, "outcome": ending.outcome},
                run_id=run_id, idempotency_key=f"ending:{run_id}",
            )
            run_store.ended_at_seq(conn, run_id, notice.seq)  # its done follows its notice
        except (AlreadyAppended, SessionNotFound):
            notice = None
    approvals.cancel_for_run(conn, run_id)
    session_store.release_writer(conn, session_key, run_id)
    return True, notice
