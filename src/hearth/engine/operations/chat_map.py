"""The session map: a chat's path as marks to jump to, one per message of the owner's, one per
turn's answer, and one per tool call, decided approval and error inside a turn, in order.

Each mark's `visibleIndex` is the coordinate edit, rewind and fork speak: the index in the
visible list `GET /api/sessions/{key}` serves (`store.branches`). An answer's mark stands for
its whole turn (the assistant messages of one run, with tool calls between them) and points at
its last message, as do the marks inside the turn; a turn with no answer (one that failed) points
at the message it answered. An answer's mark carries the turn's telemetry. A pending approval is
not a mark: the map is what the store witnesses, and it holds back what is not decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from hearth.engine.views import as_object, event_text, iso, sendable
from hearth.sessions import chats
from hearth.store import approvals, branches
from hearth.store.approvals import ApprovalRow
from hearth.store.db import Database
from hearth.store.transcript import EventRow

PREVIEW = 80  # characters of a mark's preview


@dataclass
class _Turn:
    """The marks of one run, and the visible index they jump to."""

    marks: list[dict[str, Any]] = field(default_factory=list)
    jump: int | None = None


async def chat_map(db: Database, key: str) -> list[dict[str, Any]]:
    return await db.reading(_map, key)


def _map(conn: Connection, key: str) -> list[dict[str, Any]]:
    chats.chat_in(conn, key)  # 404 for a chat that is not there
    decided = {(a.run_id, a.call_id): a for a in approvals.decided_in(conn, key)}
    return marks(branches.path(conn, key), decided)


def marks(events: list[EventRow], decided: dict[tuple[str, str], ApprovalRow]
          ) -> list[dict[str, Any]]:
    """The marks of a path's events (oldest first), numbered in order."""
    turns: list[_Turn] = []
    runs: dict[str, _Turn] = {}
    visible = 0
    for event in events:
        turn = runs.get(event.run_id or "") if event.kind != "user" else None
        if turn is None:  # a message of the owner's, or a turn's first event on this path
            turn = _Turn()
            turns.append(turn)
            if event.run_id:
                runs[event.run_id] = turn
        _add(turn, event, visible, decided)
        if event.kind in branches.VISIBLE:
            visible += 1
    flat = [mark for turn in turns for mark in _pointed(turn)]
    for number, mark in enumerate(flat):
        mark["markIndex"] = number
    return flat


def _add(turn: _Turn, event: EventRow, visible: int,
         decided: dict[tuple[str, str], ApprovalRow]) -> None:
    if event.kind == "user":
        mark = _mark(event, "user", "user", _text(event))
        mark["visibleIndex"] = turn.jump = visible
        turn.marks.append(mark)
    elif event.kind == "assistant":
        _answer(turn, event, visible)
    elif event.kind == "tool_call":
        content = as_object(event.content)
        name = str(content.get("name", ""))
        turn.marks.append(_mark(event, "tool", "assistant", name))
        approval = decided.get((event.run_id or "", str(content.get("call_id", ""))))
        if approval is not None:
            turn.marks.append(_approval(event, approval))
    elif event.kind == "notice" and as_object(event.meta).get("ending"):
        turn.marks.append(_mark(event, "error", "system", _text(event)))


def _answer(turn: _Turn, event: EventRow, visible: int) -> None:
    """An assistant message: the turn's one answer mark, now ending at this message."""
    found = next((m for m in turn.marks if m["kind"] == "assistant"), None)
    if found is None:
        found = _mark(event, "assistant", "assistant", "")
        turn.marks.append(found)
    found["preview"] = _text(event)
    found["telemetry"] = sendable(as_object(event.meta).get("turn_telemetry"))
    turn.jump = visible


def _pointed(turn: _Turn) -> list[dict[str, Any]]:
    for mark in turn.marks:
        if mark["kind"] != "user":
            mark["visibleIndex"] = turn.jump
    return turn.marks


def _mark(event: EventRow, kind: str, role: str, preview: str) -> dict[str, Any]:
    return {"kind": kind, "role": role, "visibleIndex": None, "seq": event.seq,
            "run_id": event.run_id, "ts": iso(event.created_at), "preview": preview[:PREVIEW]}


def _approval(event: EventRow, approval: ApprovalRow) -> dict[str, Any]:
    mark = _mark(event, "approval", "system", f"{approval.tool}: {approval.status}")
    mark["ts"] = iso(approval.decided_at)
    return mark


def _text(event: EventRow) -> str:
    return " ".join(event_text(event).split())
