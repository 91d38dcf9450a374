"""Approvals and grants: what the owner was asked about a tool call, what they answered, and
the standing grants an `allow_always` leaves (for an agent and a tool, optionally only for
targets under a path or command prefix) until the owner revokes them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, select, update

from hearth.store.db import now
from hearth.store.schema import approvals, grants

DECISIONS = ("allow_once", "allow_always", "deny")


@dataclass(frozen=True)
class ApprovalRow:
    id: str
    run_id: str
    session_key: str
    call_id: str
    agent: str
    tool: str
    arguments: dict[str, Any]
    effect: str
    target: str | None
    status: str
    decision: str | None
    prefix: str | None
    created_at: float
    decided_at: float | None
    principal: str  # on whose behalf the call was asked for, as stored

    @classmethod
    def of(cls, row: Any) -> ApprovalRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


def ask(conn: Connection, *, run_id: str, session_key: str, call_id: str, agent: str,
        tool: str, arguments: dict[str, Any], effect: str, target: str | None,
        principal: str) -> ApprovalRow:
    """The approval for this call: the one already asked, or a new pending one."""
    kept = for_call(conn, run_id, call_id)
    if kept is not None:
        return kept
    conn.execute(approvals.insert().values(
        id="apr_" + uuid.uuid4().hex, run_id=run_id, session_key=session_key, call_id=call_id,
        agent=agent, tool=tool, arguments=arguments, effect=effect, target=target,
        status="pending", created_at=now(), principal=principal,
    ))
    asked = for_call(conn, run_id, call_id)
    assert asked is not None
    return asked


def get(conn: Connection, approval_id: str) -> ApprovalRow | None:
    row = conn.execute(select(approvals).where(approvals.c.id == approval_id)).first()
    return ApprovalRow.of(row) if row else None


def for_call(conn: Connection, run_id: str, call_id: str) -> ApprovalRow | None:
    row = conn.execute(select(approvals).where(
        approvals.c.run_id == run_id, approvals.c.call_id == call_id)).first()
    return ApprovalRow.of(row) if row else None


def decided_in(conn: Connection, session_key: str) -> list[ApprovalRow]:
    """The chat's approvals that were answered (allowed or denied), oldest first."""
    rows = conn.execute(select(approvals).where(
        approvals.c.session_key == session_key, approvals.c.status != "pending")
        .order_by(approvals.c.created_at))
    return [ApprovalRow.of(row) for row in rows]


def pending(conn: Connection, limit: int = 200) -> list[ApprovalRow]:
    rows = conn.execute(select(approvals).where(approvals.c.status == "pending")
                        .order_by(approvals.c.created_at).limit(limit))
    return [ApprovalRow.of(row) for row in rows]


def decide(conn: Connection, approval_id: str, decision: str, prefix: str | None) -> bool:
    """Record the owner's answer on a pending approval; False if it was no longer pending."""
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}")
    status = "denied" if decision == "deny" else "allowed"
    result = conn.execute(
        update(approvals)
        .where(approvals.c.id == approval_id, approvals.c.status == "pending")
        .values(status=status, decision=decision, prefix=prefix, decided_at=now())
    )
    return result.rowcount == 1


def cancel_for_run(conn: Connection, run_id: str) -> int:
    """The run ended before the owner answered: its pending approvals no longer wait."""
    result = conn.execute(
        update(approvals)
        .where(approvals.c.run_id == run_id, approvals.c.status == "pending")
        .values(status="cancelled", decided_at=now())
    )
    return result.rowcount


@dataclass(frozen=True)
class GrantRow:
    id: int
    agent: str
    tool: str
    prefix: str | None
    approval_id: str | None
    created_at: float
    session_key: str | None  # the chat of the approval it answered, while that is kept

    @classmethod
    def of(cls, row: Any) -> GrantRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})


_GRANTS = (select(grants, approvals.c.session_key)
           .select_from(grants.outerjoin(approvals, approvals.c.id == grants.c.approval_id)))


def list_grants(conn: Connection, limit: int = 1000) -> list[GrantRow]:
    """The standing grants, newest first."""
    rows = conn.execute(_GRANTS.order_by(grants.c.created_at.desc(), grants.c.id.desc())
                        .limit(limit))
    return [GrantRow.of(row) for row in rows]


def get_grant(conn: Connection, grant_id: int) -> GrantRow | None:
    row = conn.execute(_GRANTS.where(grants.c.id == grant_id)).first()
    return GrantRow.of(row) if row else None


def revoke_grant(conn: Connection, grant_id: int) -> GrantRow | None:
    """Remove a standing grant; the grant it was, or None when there is none by that id."""
    kept = get_grant(conn, grant_id)
    if kept is not None:
        conn.execute(delete(grants).where(grants.c.id == grant_id))
    return kept


def add_grant(conn: Connection, *, agent: str, tool: str, prefix: str | None,
              approval_id: str | None) -> None:
    conn.execute(grants.insert().values(agent=agent, tool=tool, prefix=prefix,
                                        approval_id=approval_id, created_at=now()))


def granted(conn: Connection, agent: str, tool: str, target: str | None,
            narrower: Callable[[str, str], bool] | None = None) -> bool:
    """Whether a standing grant covers this agent's call of `tool` on `target`. A grant
    limited to a prefix covers it only if `narrower(prefix, target)` agrees too (the shell's:
    one simple command beyond the prefix)."""
    rows = conn.execute(select(grants.c.prefix).where(grants.c.agent == agent,
                                                      grants.c.tool == tool))
    for (prefix,) in rows:
        if prefix is None:
            return True
        if target is not None and covers(prefix, target) and (
                narrower is None or narrower(prefix, target)):
            return True
    return False


def covers(prefix: str, target: str) -> bool:
    """A path prefix covers the folder's contents (not `notes2` for `notes`); a command
    prefix covers the command and its arguments."""
    if target == prefix:
        return True
    if prefix.endswith(("/", " ")):
        return target.startswith(prefix)
    return target.startswith(prefix + "/") or target.startswith(prefix + " ")
