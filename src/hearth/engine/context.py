"""Context assembly: what the model reads for a turn.

The system prompt, then a window of the chat's history folded into model messages. Messages
queued behind this run are not part of its context. The window starts at a user message so no
tool result is cut from its call, and every call the history holds is answered (a call with no
recorded result is told it was interrupted). Compaction, later, changes only what is read here.
"""

from __future__ import annotations

from hearth.models.types import Message, ToolCall
from hearth.store import transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.transcript import EventRow

CHARS_PER_TOKEN = 3  # a cautious estimate; the budget only needs to stay under the window
NO_RESULT = (
    "No result was recorded for this call: it was interrupted, and may or may not have "
    "taken effect."
)


async def build(
    db: Database,
    run: RunRow,
    *,
    system_prompt: str,
    history_messages: int,
    context_window: int,
    max_output_tokens: int,
) -> list[Message]:
    events = await db.reading(transcript.window, run.session_key, history_messages)
    mine = [e for e in events if not _queued_behind(e, run)]
    messages = fold(by_turn(mine))
    budget = max(1000, (context_window - max_output_tokens) * CHARS_PER_TOKEN)
    messages = fit(messages, budget - len(system_prompt))
    return [Message("system", system_prompt), *messages]


def _queued_behind(event: EventRow, run: RunRow) -> bool:
    return (
        event.kind == "user"
        and run.user_event_seq is not None
        and event.seq > run.user_event_seq
    )


def by_turn(events: list[EventRow]) -> list[EventRow]:
    """Events grouped by the turn they belong to, turns in the order their messages came.

    The transcript is in arrival order, so a message queued behind a running turn sits
    before that turn's answer; the model reads each question followed by its own answer.
    """
    anchor = {e.run_id: e.seq for e in events if e.kind == "user" and e.run_id}
    return sorted(events, key=lambda e: (anchor.get(e.run_id, 0) if e.run_id else e.seq, e.seq))


def fold(events: list[EventRow]) -> list[Message]:
    """Transcript events as model messages: calls joined to their assistant message."""
    out: list[Message] = []
    for event in events:
        content = event.content
        if event.kind == "user":
            out.append(Message("user", str(content.get("text", ""))))
        elif event.kind == "assistant":
            out.append(Message("assistant", str(content.get("text", ""))))
        elif event.kind == "tool_call":
            call = ToolCall(str(content["call_id"]), str(content["name"]),
                            dict(content.get("arguments") or {}))
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = Message("assistant", last.text, (*last.tool_calls, call))
            else:
                out.append(Message("assistant", "", (call,)))
        elif event.kind == "tool_result":
            out.append(
                Message("tool", str(content.get("output", "")),
                        tool_call_id=str(content["call_id"]),
                        tool_name=str(content.get("name", "")),
                        is_error=bool(content.get("is_error")))
            )
    return _answer_every_call(_from_first_user(out))


def _from_first_user(messages: list[Message]) -> list[Message]:
    for index, message in enumerate(messages):
        if message.role == "user":
            return messages[index:]
    return []


def _answer_every_call(messages: list[Message]) -> list[Message]:
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    known: set[str] = set()
    out: list[Message] = []
    pending: list[Message] = []  # stand-ins owed after the results that exist
    for message in messages:
        if message.role != "tool" and pending:
            out.extend(pending)
            pending = []
        if message.role == "tool" and message.tool_call_id not in known:
            continue  # a result whose call fell out of the window
        out.append(message)
        if message.role == "assistant" and message.tool_calls:
            known.update(c.call_id for c in message.tool_calls)
            pending = [
                Message("tool", NO_RESULT, tool_call_id=c.call_id, tool_name=c.name,
                        is_error=True)
                for c in message.tool_calls if c.call_id not in answered
            ]
    out.extend(pending)
    return out


def fit(messages: list[Message], budget_chars: int) -> list[Message]:
    """Drop the oldest exchanges until the rest fits, keeping the start at a user message."""
    def size(m: Message) -> int:
        return len(m.text) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)

    total = sum(size(m) for m in messages)
    start = 0
    while total > budget_chars and start < len(messages) - 1:
        total -= size(messages[start])
        start += 1
        while start < len(messages) - 1 and messages[start].role != "user":
            total -= size(messages[start])
            start += 1
    return messages[start:]
