"""The model/tool loop: model call, tool batch, model call… until an answer or a limit.

Each model call streams through the call guard; its text is published as deltas and
checkpointed on the run within a second of arriving, whether or not more follows (one write a
second at most, however many chunks come: see `StreamKeeper`). An answer that asks for tools
is recorded (its text, then one event per call), the batch runs, and the results go back to
the model. The endings table's retries live here, each used at most once a turn: an answer
cut off before anything was shown, an output cap hit with nothing written, tools run and no
reply written, an empty answer; a connection lost before an answer is resent up to three
times unless a step that may have changed something was finished. The final answer is
appended at most once (its idempotency key is the run's); one stopped at the model's output
cap is kept, marked `capped`, and followed by a notice naming the cap and how to raise it.
Before each model call after the first, the turn takes the messages sent into it meanwhile
(`engine.turn.steering`).

When the model fails before anything of the turn was shown, `_failed` raises
`failover.ModelFailed` instead of ending the turn, so the turn can move to its next model
(`engine.turn.runner`): after a connection lost's one resend, a cut-off's one retry, a 429's short
Retry-After honoured once; never after a step that may have changed something (the turn then
ends naming it).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from hearth.engine.turn import attached, endings, failover, steering, writes
from hearth.engine.turn.compaction import in_turn
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.toolbatch import run_batch
from hearth.engine.turn.turn_state import Turn
from hearth.faults import crash_point
from hearth.models import guard
from hearth.models.spending import OverLimit
from hearth.models.types import (
    AnswerCutOff,
    Completed,
    KeyMissing,
    Message,
    ModelError,
    ModelRequest,
    ProviderUnavailable,
    ProviderUnreachable,
    TextDelta,
    ToolCall,
    ToolSpec,
)
from hearth.store import ledger, runs as run_store

NOT_RUN_LIMIT = "Not run: the turn reached its tool call limit (limits.max_tool_calls_per_turn)."
BRIEF_NOTE = (
    "Your previous reply ran out of output room before it said anything. Answer now, briefly "
    "and directly, without long reasoning."
)
REPLY_OWED_NOTE = (
    "You ran tools for this message but wrote no reply. Write your reply to the user now, "
    "from what the tools returned."
)
CHECKPOINT_SECONDS = 1.0
log = logging.getLogger(__name__)
RESEND_LIMIT = 3
RESEND_BACKOFF = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Answer:
    text: str
    done: Completed


async def drive(turn: Turn, messages: list[Message]) -> Ending:
    note: str | None = None  # said on the next request only, never kept in the history
    while True:
        if turn.model_calls >= turn.limits.max_model_calls_per_turn:
            return endings.model_call_limit(turn.limits.max_model_calls_per_turn)
        if turn.model_calls:  # a next step: it reads the messages sent into the turn meanwhile
            messages = [*messages, *await steering.take(turn)]
        turn.model_calls += 1
        request = [*messages, Message("system", note)] if note else messages
        note = None
        try:
            answer = await stream_answer(turn, request)
        except AnswerCutOff as cut:
            if not turn.streamed and turn.once("cut_off"):
                continue  # nothing of it was shown: asked once more, on its own
            await keep_partial(turn, cut.code)
            return await _failed(turn, endings.cut_off(cut.sentence), cut, messages)
        except OverLimit as over:  # not sent: no other model is tried (the limit is the owner's)
            return endings.spending_limit(over.sentence)
        except ProviderUnreachable as lost:
            retry = await _after_lost_connection(turn, lost, messages)
            if isinstance(retry, Ending):
                return retry
            continue
        except ModelError as error:
            compacted = await in_turn.after_rejection(turn, error)  # a prompt too long
            if isinstance(compacted, Ending):
                return compacted
            if compacted is not None:
                messages = compacted  # sent once more, compacted
                continue
            if await _waited_for_rate_limit(turn, error):
                continue
            await keep_partial(turn, error.code)
            ending = (endings.key_missing(error.sentence) if isinstance(error, KeyMissing)
                      else endings.model_error(error.sentence))
            return await _failed(turn, ending, error, messages)
        if answer.done.tool_calls:
            step = await _tool_step(turn, answer, answer.done.tool_calls)
            if isinstance(step, Ending):
                return step
            messages = [*messages, Message("assistant", answer.text, answer.done.tool_calls),
                        *step]
            continue
        if answer.text:
            await _append_final(turn, answer)
            if answer.done.finish_reason == "length":
                await _say_capped(turn)
            return endings.complete()
        if answer.done.finish_reason == "length":
            if turn.once("output_cap"):
                note = BRIEF_NOTE
                continue
            return endings.output_cap(_cap_of(turn))
        if turn.tool_calls:
            if turn.once("reply_owed"):
                note = REPLY_OWED_NOTE
                continue
            return endings.no_answer(turn.tool_calls)
        if turn.once("empty"):
            continue  # wrote nothing and ran nothing: resent once, silently
        return endings.no_answer(0)


async def stream_answer(turn: Turn, messages: list[Message]) -> Answer:
    specs = [ToolSpec(t.name, t.description, t.parameters) for t in turn.offered()]
    request = ModelRequest(messages=await attached.for_model(turn, messages), tools=specs,
                           response_format=turn.response_format)
    turn.streamed = ""
    done: Completed | None = None
    keeper = StreamKeeper(turn)
    try:
        async for event in guard.stream(turn.provider, request, purpose="turn"):
            turn.touch()
            if isinstance(event, TextDelta):
                first = not turn.streamed
                turn.streamed += event.text
                turn.shown = True
                turn.bus.delta(turn.session_key, turn.run_id, event.text)
                keeper.arrived()
                if first:
                    crash_point("mid_stream")
            else:
                done = event
    finally:
        keeper.close()
    if done is None:  # an adapter must raise AnswerCutOff instead; hold the rule here too
        raise AnswerCutOff("The model's answer was cut off: no terminal event arrived.")
    if turn.breakers is not None:
        turn.breakers.succeeded(turn.provider.model_id)
    turn.tokens_in += done.usage.tokens_in
    turn.tokens_out += done.usage.tokens_out
    in_turn.measured(turn, messages, done.usage)
    return Answer(turn.streamed, done)


class StreamKeeper:
    """Keeps what has streamed on the run within `CHECKPOINT_SECONDS` of its arrival.

    Text not yet kept arms a timer; when it fires, everything streamed so far is written in one
    checkpoint. So a burst of chunks costs one write a second, and text followed by a pause is
    kept during the pause (before, a checkpoint was written only when a later chunk arrived, so
    the text before a stall was lost to a kill). The timer runs on the loop and starts a task
    that queues the write; it is cancelled when the stream ends (its text is then recorded or
    kept partial by the loop itself). The one writer takes jobs in the order they were queued,
    so a checkpoint queued before the loop clears it cannot land after the clearing.
    """

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def arrived(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(CHECKPOINT_SECONDS, self._keep)

    def _keep(self) -> None:
        self._timer = None
        if self._turn.streamed:
            self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        try:
            await checkpoint(self._turn)
        except SQLAlchemyError as error:  # bookkeeping: the next chunk arms another try
            log.warning("run %s: the streamed text could not be checkpointed (%s)",
                        self._turn.run_id, type(error).__name__)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            self._task.cancel()  # not yet queued: never queued; queued: lands before later writes


async def checkpoint(turn: Turn) -> None:
    """Keep what has streamed so far on the run, so a crash does not lose it."""
    text = turn.streamed or None
    turn.checkpointed = text is not None
    await turn.db.writing(run_store.checkpoint, turn.run_id, text, durable=False)


async def keep_partial(turn: Turn, why: str) -> None:
    """Append what streamed of an answer that did not finish, marked partial."""
    if not turn.streamed:
        return
    meta = {"finish_reason": "incomplete", "partial": True, "cut_off": why,
            "turn_telemetry": turn.telemetry(), "context_fed": turn.context_fed}
    await writes.append(turn, "assistant", {"text": turn.streamed}, meta=meta)
    turn.streamed = ""


async def _after_lost_connection(turn: Turn, lost: ProviderUnreachable,
                                 messages: list[Message]) -> Ending | None:
    """None: send the call again (after a pause). A model another may stand in for gets one
    resend; one alone gets `RESEND_LIMIT`."""
    changed = await turn.db.reading(ledger.changed_something, turn.run_id)
    if changed:
        return endings.connection_lost_after_steps(changed)
    limit = 1 if turn.may_fail_over and not turn.shown else RESEND_LIMIT
    if turn.resends >= limit:
        ending = endings.connection_lost(lost.sentence, turn.resends + 1)
        return await _failed(turn, ending, lost, messages)
    await asyncio.sleep(RESEND_BACKOFF[turn.resends])
    turn.resends += 1
    turn.model_calls -= 1  # a resend is the same call again, not another step
    return None


async def _failed(turn: Turn, ending: Ending, error: ModelError,
                  messages: list[Message]) -> Ending:
    """The model failed: the turn ends as `ending`, unless another model may take it (nothing
    of the turn shown, no step begun that may have changed something): then `ModelFailed`."""
    if not turn.may_fail_over or turn.shown:
        return ending
    step = await failover.changing_step(turn.db, turn.run_id)
    if step is not None:
        return endings.not_moved(ending, step.tool)
    raise failover.ModelFailed(ending, failover.why_failed(error), messages)


async def _waited_for_rate_limit(turn: Turn, error: ModelError) -> bool:
    """A 429 asking for a short wait (`limits.retry_after_max_seconds` at most) is honoured
    once per model: True once it has waited, and the same call goes again."""
    if not isinstance(error, ProviderUnavailable) or error.status != 429:
        return False
    wait = error.retry_after
    if wait is None or wait > turn.limits.retry_after_max_seconds:
        return False
    if not turn.once(f"rate_limited:{turn.provider.model_id}"):
        return False
    await asyncio.sleep(wait)
    turn.model_calls -= 1  # the same call again, not another step
    return True


async def _tool_step(
    turn: Turn, answer: Answer, calls: tuple[ToolCall, ...]
) -> Ending | list[Message]:
    """Record the request, then run the batch (its results) or refuse it past the limit."""
    if answer.text:
        await writes.append(turn, "assistant", {"text": answer.text},
                            meta={"finish_reason": answer.done.finish_reason})
    await writes.append_many(turn, [
        ("tool_call", {"call_id": c.call_id, "name": c.name, "arguments": c.arguments}, {})
        for c in calls
    ])
    await checkpoint_cleared(turn)
    crash_point("tools_requested")
    limit = turn.limits.max_tool_calls_per_turn
    if turn.tool_calls + len(calls) > limit:
        await writes.append_many(turn, [
            ("tool_result", {"call_id": c.call_id, "name": c.name, "output": NOT_RUN_LIMIT,
                             "is_error": True}, {})
            for c in calls
        ])
        return endings.tool_call_limit(limit)
    turn.tool_calls += len(calls)
    return await run_batch(turn, calls)


async def checkpoint_cleared(turn: Turn) -> None:
    """The streamed text is recorded now; the run's checkpoint of it is no longer needed."""
    turn.streamed = ""
    if turn.checkpointed:
        turn.checkpointed = False
        await turn.db.writing(run_store.checkpoint, turn.run_id, None, durable=False)


async def _append_final(turn: Turn, answer: Answer) -> None:
    meta: dict[str, object] = {"finish_reason": answer.done.finish_reason,
                               "turn_telemetry": turn.telemetry(),
                               "context_fed": turn.context_fed, **turn.notes}
    if answer.done.finish_reason == "length":
        meta["capped"] = True
    await writes.append(turn, "assistant", {"text": answer.text}, meta=meta,
                        idempotency_key=f"final:{turn.run_id}")
    turn.streamed = ""
    crash_point("answer_persisted")


async def _say_capped(turn: Turn) -> None:
    """The answer above stopped at the model's output cap: say which, and how to raise it."""
    await writes.append(turn, "notice", {"text": endings.capped_notice(
        turn.provider.model_id, _cap_of(turn))}, meta={"about": "output_cap"})


def _cap_of(turn: Turn) -> int | None:
    return getattr(turn.provider, "max_output_tokens", None)
