"""The side-effect ledger: every tool call, recorded `started` before it runs.

A call's row says what it was (tool, arguments, effect class) and how it went (status, result,
a one-sentence receipt). Recovery and retry read it; nothing re-runs a call that may have
changed something.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from hearth.store.db import now
from hearth.store.schema import tool_calls

EFFECTS = ("reads", "changes", "external")
STATUSES = ("requested", "denied", "started", "finished", "failed", "unknown")


@dataclass(frozen=True)
class CallRow:
    run_id: str
    call_id: str
    position: int
    tool: str
    arguments: dict[str, Any]
    effect: str
    status: str
    result: str | None
    receipt: str | None

    @classmethod
    def of(cls, row: Any) -> CallRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


_INSERT = tool_calls.insert()
_END = (
    update(tool_calls)
    .where(tool_calls.c.run_id == bindparam("b_run"), tool_calls.c.call_id == bindparam("b_call"))
    .values(status=bindparam("b_status"), result=bindparam("b_result"),
            receipt=bindparam("b_receipt"), ended_at=bindparam("b_at"))
)


_TAKE_REQUESTED = (
    update(tool_calls)
    .where(tool_calls.c.run_id == bindparam("b_run"), tool_calls.c.call_id == bindparam("b_call"),
           tool_calls.c.status == "requested")
    .values(status="started", started_at=bindparam("b_at"))
)


def record_started(
    conn: Connection,
    *,
    run_id: str,
    session_key: str,
    call_id: str,
    position: int,
    tool: str,
    arguments: dict[str, Any],
    effect: str,
) -> None:
    """The call is about to run (a requested one goes on from its request)."""
    if effect not in EFFECTS:
        raise ValueError(f"unknown effect class {effect!r}")
    taken = conn.execute(_TAKE_REQUESTED, {"b_run": run_id, "b_call": call_id, "b_at": now()})
    if taken.rowcount:
        return
    conn.execute(_INSERT, {
        "run_id": run_id, "session_key": session_key, "call_id": call_id,
        "position": position, "tool": tool, "arguments": arguments, "effect": effect,
        "status": "started", "started_at": now(),
    })


def record_requested(
    conn: Connection, *, run_id: str, session_key: str, call_id: str, position: int,
    tool: str, arguments: dict[str, Any], effect: str,
) -> None:
    """The call waits on the owner's answer; it has not run."""
    if get(conn, run_id, call_id) is None:
        conn.execute(_INSERT, {
            "run_id": run_id, "session_key": session_key, "call_id": call_id,
            "position": position, "tool": tool, "arguments": arguments, "effect": effect,
            "status": "requested", "started_at": None,
        })


def record_denied(conn: Connection, *, run_id: str, call_id: str, receipt: str) -> None:
    conn.execute(update(tool_calls)
                 .where(tool_calls.c.run_id == run_id, tool_calls.c.call_id == call_id,
                        tool_calls.c.status == "requested")
                 .values(status="denied", receipt=receipt, ended_at=now()))


def get(conn: Connection, run_id: str, call_id: str) -> CallRow | None:
    row = conn.execute(select(tool_calls).where(tool_calls.c.run_id == run_id,
                                                tool_calls.c.call_id == call_id)).first()
    return CallRow.of(row) if row else None


def record_ended(
    conn: Connection, *, run_id: str, call_id: str, status: str, result: str, receipt: str
) -> None:
    if status not in ("finished", "failed", "unknown"):
        raise ValueError(f"{status!r} is not how a call ends")
    conn.execute(_END, {"b_run": run_id, "b_call": call_id, "b_status": status,
                        "b_result": result, "b_receipt": receipt, "b_at": now()})


def for_run(conn: Connection, run_id: str) -> list[CallRow]:
    stmt = select(tool_calls).where(tool_calls.c.run_id == run_id).order_by(tool_calls.c.id)
    return [CallRow.of(row) for row in conn.execute(stmt)]


def mark_unknown(conn: Connection, run_id: str, receipt: str) -> list[CallRow]:
    """Calls of the run recorded started but never ended: whether they took effect is unknown.
    They are never run again; answers the rows it marked."""
    open_calls = [c for c in for_run(conn, run_id) if c.status == "started"]
    if open_calls:
        conn.execute(
            update(tool_calls)
            .where(tool_calls.c.run_id == run_id, tool_calls.c.status == "started")
            .values(status="unknown", receipt=receipt, ended_at=now())
        )
    return open_calls


def changed_something(conn: Connection, run_id: str) -> int:
    """How many of the run's calls may have changed something (not read-only, and begun)."""
    return sum(1 for c in for_run(conn, run_id)
               if c.effect != "reads" and c.status in ("finished", "failed", "unknown"))
