"""A chat's last messages as the terminal shows them: what you said after the prompt's `you> `,
the answers as they were, each tool call as one line (its receipt once it has one), and how a
turn ended when it did not end with an answer.

Each message and answer is numbered with its visible index (`[3] you> …`), the number
`/rewind N` and `/fork N` take; one with variants says which it is (`(variant 2 of 3)`)."""

from __future__ import annotations

import json
from typing import Any

from hearth.client.terminal import Screen

SHOWN = 10  # messages shown (a tool call and its result count as one)
READ = 60  # events read to find them (results, summaries and the like are not shown)
CALL_CHARS = 100


def lines(messages: list[dict[str, Any]], shown: int = SHOWN) -> list[str]:
    """The lines of the last `shown` messages of `messages` (oldest first)."""
    answered = {_call_id(m) for m in messages if m.get("kind") == "tool_result"}
    drawn = [line for m in messages if (line := _line(m, answered)) is not None]
    return drawn[-shown:]


def show(screen: Screen, messages: list[dict[str, Any]], shown: int = SHOWN) -> int:
    """Print the last messages; how many lines that was."""
    drawn = lines(messages, shown)
    for line in drawn:
        screen.line(line)
    return len(drawn)


def _line(message: dict[str, Any], answered: set[str | None]) -> str | None:
    kind = message.get("kind")
    text = str(message.get("text", ""))
    if kind == "user":
        return f"{_number(message)}you> {text}"
    if kind == "assistant":
        return f"{_number(message)}{text}" if text else None
    if kind == "tool_call":
        return None if _call_id(message) in answered else f"  · {_call(message)}"
    if kind == "tool_result":
        receipt = (message.get("meta") or {}).get("receipt")
        return f"  · {receipt}" if receipt else f"  · {_call(message)}"
    if kind == "notice":
        ending = (message.get("meta") or {}).get("ending")
        return f"[{ending}] {text}" if ending else f"[{text}]"
    return None


def _number(message: dict[str, Any]) -> str:
    """`[N] ` for a message with a visible index, `[N] (variant i of n) ` when it has variants."""
    index = message.get("visible_index")
    if index is None:
        return ""
    variants = message.get("variants") or {}
    count = int(variants.get("count", 1))
    which = f"(variant {int(variants.get('index', 0)) + 1} of {count}) " if count > 1 else ""
    return f"[{index}] {which}"


def _call_id(message: dict[str, Any]) -> str | None:
    call_id = (message.get("content") or {}).get("call_id")
    return str(call_id) if call_id is not None else None


def _call(message: dict[str, Any]) -> str:
    """`name(argument, …)` on one line."""
    content = message.get("content") or {}
    arguments = content.get("arguments")
    shown = ", ".join(_value(v) for v in arguments.values()) \
        if isinstance(arguments, dict) else ""
    line = f"{content.get('name', 'a tool')}({shown})".replace("\n", " ")
    return line if len(line) <= CALL_CHARS else line[:CALL_CHARS - 2] + "…)"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
