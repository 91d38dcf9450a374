"""The model/tool loop: model call, tool batch, model call… until an answer or a limit.

Each model call streams through the call guard; its text is published as deltas. An answer
that asks for tools is recorded (its text, then one event per call), the batch runs, and the
results go back to the model. The loop ends with an `Ending`; the final answer is appended at
most once (its idempotency key is the run's).
"""

from __future__ import annotations

from dataclasses import dataclass

from hearth.engine import endings, record
from hearth.engine.endings import Ending
from hearth.engine.state import Turn
from hearth.engine.toolbatch import run_batch
from hearth.models import guard
from hearth.models.types import (
    AnswerCutOff,
    Completed,
    Message,
    ModelError,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
)

NOT_RUN_LIMIT = "Not run: the turn reached its tool call limit (limits.max_tool_calls_per_turn)."


@dataclass(frozen=True)
class Answer:
    text: str
    done: Completed


async def drive(turn: Turn, messages: list[Message]) -> Ending:
    while True:
        if turn.model_calls >= turn.limits.max_model_calls_per_turn:
            return endings.model_call_limit(turn.limits.max_model_calls_per_turn)
        turn.model_calls += 1
        try:
            answer = await stream_answer(turn, messages)
        except AnswerCutOff as cut:
            _keep_partial(turn, cut)
            return endings.cut_off(cut.sentence)
        except ModelError as error:
            _keep_partial(turn, error)
            return endings.model_error(error.sentence)
        calls = answer.done.tool_calls
        if calls:
            step = await _tool_step(turn, answer, calls)
            if isinstance(step, Ending):
                return step
            messages = [*messages, Message("assistant", answer.text, calls), *step]
            continue
        if answer.text:
            _append_final(turn, answer)
            return endings.complete()
        if answer.done.finish_reason == "length":
            return endings.output_cap(_cap_of(turn))
        if turn.tool_calls == 0 and not turn.resent_empty:
            turn.resent_empty = True  # wrote nothing and ran nothing: resend once, silently
            continue
        return endings.no_answer(turn.tool_calls)


async def stream_answer(turn: Turn, messages: list[Message]) -> Answer:
    specs = [ToolSpec(t.name, t.description, t.parameters) for t in turn.tools.all()]
    request = ModelRequest(messages=messages, tools=specs if turn.offer_tools else [])
    turn.streamed = ""
    done: Completed | None = None
    async for event in guard.stream(turn.provider, request):
        if isinstance(event, TextDelta):
            turn.streamed += event.text
            turn.bus.delta(turn.session_key, turn.run_id, event.text)
        else:
            done = event
    if done is None:  # an adapter must raise AnswerCutOff instead; hold the rule here too
        raise AnswerCutOff("The model's answer was cut off: no terminal event arrived.")
    turn.tokens_in += done.usage.tokens_in
    turn.tokens_out += done.usage.tokens_out
    return Answer(turn.streamed, done)


async def _tool_step(
    turn: Turn, answer: Answer, calls: tuple[ToolCall, ...]
) -> Ending | list[Message]:
    """Record the request, then run the batch (its results) or refuse it past the limit."""
    if answer.text:
        record.append(turn, "assistant", {"text": answer.text},
                      meta={"finish_reason": answer.done.finish_reason})
    record.append_many(turn, [
        ("tool_call", {"call_id": c.call_id, "name": c.name, "arguments": c.arguments}, {})
        for c in calls
    ])
    limit = turn.limits.max_tool_calls_per_turn
    if turn.tool_calls + len(calls) > limit:
        record.append_many(turn, [
            ("tool_result", {"call_id": c.call_id, "name": c.name, "output": NOT_RUN_LIMIT,
                             "is_error": True}, {})
            for c in calls
        ])
        return endings.tool_call_limit(limit)
    turn.tool_calls += len(calls)
    return await run_batch(turn, calls)


def _append_final(turn: Turn, answer: Answer) -> None:
    meta = {"finish_reason": answer.done.finish_reason, "turn_telemetry": turn.telemetry()}
    record.append(turn, "assistant", {"text": answer.text}, meta=meta,
                  idempotency_key=f"final:{turn.run_id}")


def _keep_partial(turn: Turn, error: ModelError) -> None:
    if not turn.streamed:
        return
    meta = {"finish_reason": "incomplete", "partial": True, "cut_off": error.code,
            "turn_telemetry": turn.telemetry()}
    record.append(turn, "assistant", {"text": turn.streamed}, meta=meta)


def _cap_of(turn: Turn) -> int | None:
    return getattr(turn.provider, "max_output_tokens", None)
