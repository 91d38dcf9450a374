"""How persisted events and runs look to every surface (one shape for API, SSE and CLI).

What a model wrote is shown as it is, except what JSON cannot carry as UTF-8: a lone surrogate
(a model may send one as a JSON escape) becomes U+FFFD and a number that is not finite
becomes null (`sendable`), so no message of a chat can make a view that cannot be sent.
"""

from __future__ import annotations

import math
import re
import reprlib
from datetime import UTC, datetime
from typing import Any

from hearth.store.branches import Variants
from hearth.store.ledger import CallRow
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow

ROLES = {
    "user": "user",
    "assistant": "assistant",
    "tool_call": "assistant",
    "tool_result": "tool",
    "notice": "system",
    "summary": "system",
}


_SURROGATE = re.compile("[\ud800-\udfff]")
SENDABLE_DEPTH = 64  # deeper than this, a value is shown as text


def sendable_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it can be sent as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def sendable(value: Any, depth: int = 0) -> Any:
    """A JSON value that can be sent as it is: strings (keys too) made `sendable_text`,
    numbers that are not finite made null, anything nested deeper than SENDABLE_DEPTH (or
    not JSON at all) made text."""
    if isinstance(value, str):
        return sendable_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= SENDABLE_DEPTH or not isinstance(value, dict | list | tuple):
        return sendable_text(reprlib.repr(value))  # bounded in length and depth
    if isinstance(value, dict):
        return {sendable_text(str(k)): sendable(v, depth + 1) for k, v in value.items()}
    return [sendable(v, depth + 1) for v in value]


def iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()


def event_text(event: EventRow) -> str:
    content = event.content
    if event.kind == "tool_call":
        return f"{content.get('name')}({content.get('arguments')})"
    if event.kind == "tool_result":
        return str(content.get("output", ""))
    return str(content.get("text", ""))


def message_view(event: EventRow, *, visible_index: int | None = None,
                 variants: Variants | None = None) -> dict[str, Any]:
    """An event as the API serves it. `visible_index`: its place in the visible list (user and
    assistant messages on the path; None for others); `variants`: its siblings, if any."""
    return {
        "index": event.seq,
        "id": event.event_id,
        "role": ROLES.get(event.kind, "system"),
        "kind": event.kind,
        "text": sendable_text(event_text(event)),
        "content": sendable(event.content),
        "meta": sendable(event.meta),
        "run_id": event.run_id,
        "source": {"channel": event.source_channel, "thread": event.source_thread,
                   "user": event.source_user},
        "visible_index": visible_index,
        "variants": ({"count": variants.count, "index": variants.index} if variants
                     else {"count": 1, "index": 0}),
        "created_at": iso(event.created_at),
    }


def session_view(row: SessionRow) -> dict[str, Any]:
    return {
        "key": row.key,
        "tab_id": row.tab_id,
        "title": row.title,
        "memory_mode": row.memory_mode,
        "agent": row.agent,
        "model": row.model,
        "workspace_dir": row.workspace_dir,
        "origin": row.origin,
        "generation": row.generation,
        "message_count": row.message_count,
        "last_seq": row.last_seq,
        "archived": row.archived,
        "trust": row.trust,
        "folder": row.folder,
        "tags": list(row.tags),
        "pinned": row.pinned,
        "created_by_app": row.created_by_app,  # the app whose token started it; None: yours
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def call_view(call: CallRow) -> dict[str, Any]:
    return {
        "call_id": call.call_id,
        "tool": call.tool,
        "effect": call.effect,
        "status": call.status,
        "receipt": call.receipt,
    }


def run_view(run: RunRow, calls: list[CallRow] | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "run_id": run.run_id,
        "session": run.session_key,
        "kind": run.kind,
        "status": run.status,
        "ending": run.ending,
        "sentence": run.sentence,
        "model": run.model,
        "recovery_attempts": run.recovery_attempts,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
    }
    if calls is not None:
        view["tool_calls"] = [call_view(c) for c in calls]
        view["receipts"] = [  # one sentence per call that may have changed something
            c.receipt for c in calls
            if c.effect != "reads" and c.receipt and c.status in ("finished", "failed", "unknown")
        ]
    return view
