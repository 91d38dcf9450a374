"""How persisted events, runs, chats and grants look to every surface (one shape for API,
SSE and CLI).

What a model wrote is shown as it is, except what JSON cannot carry as UTF-8: a lone surrogate
(a model may send one as a JSON escape) becomes U+FFFD and a number that is not finite
becomes null (`sendable`), so no message of a chat can make a view that cannot be sent.

Reading never raises on a stored value it did not expect (a row an older Hearth, a bad import
or a hand edit left): a time that is no time (not a number, not finite, out of the calendar's
range) is shown as null, content or meta that is not an object as empty, and a message's text
then reads `UNREADABLE`; the view names each such field in its `unreadable` list (present only
when there is one).
"""

from __future__ import annotations

import math
import re
import reprlib
from datetime import UTC, datetime
from typing import Any

from hearth.store.approvals import GrantRow
from hearth.store.attachments import AttachmentRow
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


UNREADABLE = "unreadable"  # what a view shows for a stored value it cannot read
WORDS = {"user": "text", "assistant": "text", "notice": "text", "summary": "text",
         "tool_call": "name", "tool_result": "output"}  # the text each kind's content holds
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


def moment(stamp: object) -> datetime | None:
    """The UTC time a stored UNIX time says; None for one that is none (null, not a number,
    not finite, or out of the calendar's range)."""
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return None
    try:
        return datetime.fromtimestamp(stamp, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def iso(stamp: object) -> str | None:
    """A stored time as ISO 8601 in UTC; None for null and for a time that cannot be read."""
    found = moment(stamp)
    return None if found is None else found.isoformat()


def unreadable_times(**stamps: object) -> list[str]:
    """The names of the times given that hold a value but no readable time."""
    return [name for name, stamp in stamps.items() if stamp is not None and moment(stamp) is None]


def _marked(view: dict[str, Any], unreadable: list[str]) -> dict[str, Any]:
    """`view`, naming the fields it could not read (only when there are some)."""
    if unreadable:
        view["unreadable"] = unreadable
    return view


def as_object(value: object) -> dict[str, Any]:
    """A stored JSON value (an event's content or meta) as an object: itself when it is one,
    else empty."""
    return value if isinstance(value, dict) else {}


def readable_content(event: EventRow) -> bool:
    """Whether the event's content has its kind's shape: an object holding its words (a
    message's text, a result's output, a call's tool name) as text."""
    content: object = event.content
    if not isinstance(content, dict):
        return False
    words = WORDS.get(event.kind)
    return words is None or isinstance(content.get(words), str)


def event_text(event: EventRow) -> str:
    content = event.content
    if not readable_content(event):
        return UNREADABLE
    if event.kind == "tool_call":
        return f"{content.get('name')}({content.get('arguments')})"
    if event.kind == "tool_result":
        return str(content.get("output", ""))
    return str(content.get("text", ""))


def sent_text(event: EventRow) -> str:
    """What the model reads of a user's event: the text its mention sent (`meta.prompt.sent`,
    `engine.intake.mentions`), else the text as typed."""
    prompt = event.meta.get("prompt") if isinstance(event.meta, dict) else None
    if isinstance(prompt, dict) and isinstance(prompt.get("sent"), str):
        return str(prompt["sent"])
    return str(event.content.get("text", ""))


def message_view(event: EventRow, *, visible_index: int | None = None,
                 variants: Variants | None = None) -> dict[str, Any]:
    """An event as the API serves it. `visible_index`: its place in the visible list (user and
    assistant messages on the path; None for others); `variants`: its siblings, if any."""
    meta: object = event.meta
    unreadable = [name for name, readable in (("content", readable_content(event)),
                                              ("meta", isinstance(meta, dict)))
                  if not readable]
    view = {
        "index": event.seq,
        "id": event.event_id,
        "role": ROLES.get(event.kind, "system"),
        "kind": event.kind,
        "text": sendable_text(event_text(event)),
        "content": sendable(event.content) if "content" not in unreadable else {},
        "meta": sendable(event.meta) if "meta" not in unreadable else {},
        "run_id": event.run_id,
        "source": {"channel": event.source_channel, "thread": event.source_thread,
                   "user": event.source_user},
        "visible_index": visible_index,
        "variants": ({"count": variants.count, "index": variants.index} if variants
                     else {"count": 1, "index": 0}),
        "created_at": iso(event.created_at),
    }
    return _marked(view, unreadable + unreadable_times(created_at=event.created_at))


def attachment_ref(row: AttachmentRow) -> dict[str, Any]:
    """An attachment as its message's meta names it (`meta.attachments`): enough to show it
    and to find its bytes, nothing of its contents."""
    return {"id": row.id, "name": row.name, "type": row.content_type, "size": row.size,
            "sha256": row.sha256}


def sent_files(meta: object) -> list[dict[str, Any]]:
    """The files a message's meta names (`meta.attachments`, each as `attachment_ref` made it;
    a channel's bare names and anything unreadable left out)."""
    named = meta.get("attachments") if isinstance(meta, dict) else None
    return [f for f in named if isinstance(f, dict)] if isinstance(named, list) else []


def file_size(size: int) -> str:
    """A file's size as a person reads it: "12 KB", "3.4 MB"."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{max(1, round(size / 1024))} KB"


def attachment_view(row: AttachmentRow) -> dict[str, Any]:
    """An attachment as the API serves it: held (uploaded, not sent yet) or sent with the
    message at `index`."""
    return {**attachment_ref(row), "index": row.event_seq, "sent": row.event_seq is not None,
            "created_at": iso(row.created_at), "transcript": row.transcript}


def session_view(row: SessionRow) -> dict[str, Any]:
    view = {
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
    return _marked(view, unreadable_times(created_at=row.created_at,
                                          updated_at=row.updated_at))


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
    _marked(view, unreadable_times(created_at=run.created_at, started_at=run.started_at,
                                   ended_at=run.ended_at))
    if calls is not None:
        view["tool_calls"] = [call_view(c) for c in calls]
        view["receipts"] = [  # one sentence per call that may have changed something
            c.receipt for c in calls
            if c.effect != "reads" and c.receipt and c.status in ("finished", "failed", "unknown")
        ]
    return view


def grant_view(row: GrantRow) -> dict[str, Any]:
    """A standing grant, with the chat whose approval left it (while that approval is kept)."""
    return {"id": row.id, "tool": row.tool, "agent": row.agent, "prefix": row.prefix,
            "created_at": iso(row.created_at), "approval_id": row.approval_id,
            "session": row.session_key}
