"""The approval desk: the owner's answers to the calls that wait on them.

A call that may change something and that no grant or trust setting covers is asked about: the
request is persisted, shown as an `approval` frame, and its turn waits here until the owner
answers (`allow_once`, `allow_always` — which leaves a standing grant — or `deny`). The row is
the truth: a turn resumed after a restart waits on the same approval, and an answer given while
no turn waits is read when one does.

Every view of an approval carries a `preview` of its call (`engine.turn.approval.preview`); the
list of what waits, across every chat, adds each chat's title (or its first words) and
`always_allowed`: False where an `allow_always` would be refused (a chat that keeps nothing
makes no standing grant; a call asked for on someone else's behalf, `asked_by`, makes none
either, since grants serve the owner's own work alone), so a page does not offer "Always" there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import Bus
from hearth.engine.turn.approval.preview import preview
from hearth.engine.views import sendable
from hearth.errors import Refusal
from hearth.privacy import principal as principals, reach
from hearth.privacy.modes import mode_of
from hearth.store import approvals, audit, sessions, transcript
from hearth.store.approvals import ApprovalRow
from hearth.store.db import Database
from hearth.store.sessions import SessionRow

TITLE_CHARS = 60  # of an untitled chat's first message, standing for its title


def approval_view(row: ApprovalRow) -> dict[str, Any]:
    return {
        "id": row.id, "run_id": row.run_id, "session": row.session_key, "call_id": row.call_id,
        "agent": row.agent, "tool": row.tool, "arguments": sendable(row.arguments),
        "effect": row.effect,
        "target": row.target, "status": row.status, "decision": row.decision,
        "prefix": row.prefix, "created_at": row.created_at, "decided_at": row.decided_at,
        "preview": preview(row.tool, row.arguments),
        "asked_by": asked_by(row),
    }


def asked_by(row: ApprovalRow) -> str | None:
    """On whose behalf the call was asked for, as the card says it ("app Zapier"); None for
    the owner's own work."""
    principal = principals.decode(row.principal)
    return None if principal.is_owner else principal.shown()


def waiting_view(row: ApprovalRow, chat: SessionRow | None, opening: str | None
                 ) -> dict[str, Any]:
    """An approval in the list of what waits: its view, its chat's title (or first words)
    and whether "Always" may be answered."""
    title = chat.title if chat is not None and chat.title else None
    if title is None and opening:
        title = " ".join(opening.split())[:TITLE_CHARS] or None
    return {**approval_view(row), "title": title,
            "always_allowed": always_allowed(chat) and asked_by(row) is None}


def always_allowed(chat: SessionRow | None) -> bool:
    """Whether an `allow_always` for a call of this chat would be taken: not for a chat
    that keeps nothing, nor one that is gone (the same rule `decide` holds)."""
    mode = mode_of(chat.memory_mode if chat is not None else None)
    return reach.lasting_refusal("a standing grant", mode) is None


class ApprovalDesk:
    def __init__(self, db: Database, bus: Bus) -> None:
        self._db = db
        self._bus = bus
        self._waiters: dict[str, asyncio.Event] = {}

    def announce(self, row: ApprovalRow) -> None:
        self._bus.publish(row.session_key, {"type": "approval", "run_id": row.run_id,
                                            "approval": approval_view(row)})

    async def wait(self, approval_id: str) -> ApprovalRow:
        """Until the owner answers (or the approval is cancelled)."""
        event = self._waiters.setdefault(approval_id, asyncio.Event())
        try:
            while True:
                event.clear()
                row = await self._db.reading(approvals.get, approval_id)
                assert row is not None
                if row.status != "pending":
                    return row
                await event.wait()
        finally:
            self._waiters.pop(approval_id, None)

    async def _refuse_lasting_grant(self, approval_id: str) -> None:
        """A standing grant outlives the chat: a chat that keeps nothing may not make one
        (refused in one sentence, with an audit row, and the approval stays pending)."""
        row, session = await self._db.reading(_with_chat, approval_id)
        if row is None:
            return
        others = asked_by(row)
        if others is not None:  # a standing grant serves the owner's own work alone
            raise Refusal("always_for_others", 409,
                          f"This call was asked for by {others}: a standing grant serves only "
                          "your own work, so answer it with Allow once or Deny.")
        mode = mode_of(session.memory_mode if session is not None else None)
        refusal = reach.lasting_refusal("a standing grant", mode)
        if refusal is None:
            return
        await self._db.writing(
            audit.write, "approval.refused", actor="privacy", session_key=row.session_key,
            run_id=row.run_id, durable=False,
            detail={"approval": row.id, "tool": row.tool, "decision": "allow_always",
                    "reason": "the chat keeps nothing"})
        raise reach.RestrictedSession(refusal)

    async def pending(self) -> list[dict[str, Any]]:
        """What waits on the owner, across every chat, oldest first."""
        return await self._db.reading(_waiting)

    async def decide(self, approval_id: str, decision: str,
                     prefix: str | None) -> dict[str, Any]:
        """Record the owner's answer; the waiting turn (if any) goes on at once."""
        if decision == "allow_always":
            await self._refuse_lasting_grant(approval_id)
        decided = await self._db.writing(_decide, approval_id, decision, prefix)
        self.announce(decided)
        event = self._waiters.get(approval_id)
        if event is not None:
            event.set()
        return approval_view(decided)

    def wake(self, approval_ids: list[str]) -> None:
        """The calls waiting on these approvals read them again (they were cancelled)."""
        for approval_id in approval_ids:
            event = self._waiters.get(approval_id)
            if event is not None:
                event.set()


def _waiting(conn: Connection) -> list[dict[str, Any]]:
    rows = approvals.pending(conn)
    keys = sorted({row.session_key for row in rows})
    chats = {key: sessions.get(conn, key) for key in keys}
    untitled = [key for key, chat in chats.items() if chat is not None and not chat.title]
    openings = transcript.openings(conn, untitled)
    return [waiting_view(row, chats[row.session_key], openings.get(row.session_key))
            for row in rows]


def _with_chat(conn: Connection, approval_id: str) -> tuple[ApprovalRow | None, Any]:
    row = approvals.get(conn, approval_id)
    return row, sessions.get(conn, row.session_key) if row is not None else None


def _decide(conn: Connection, approval_id: str, decision: str,
            prefix: str | None) -> ApprovalRow:
    row = approvals.get(conn, approval_id)
    if row is None:
        raise Refusal("approval_not_found", 404, f"There is no approval {approval_id!r}.")
    if not approvals.decide(conn, approval_id, decision, prefix):
        raise Refusal("already_decided", 409,
                      f"This approval was already {row.status}; it cannot be answered again.")
    if decision == "allow_always":
        approvals.add_grant(conn, agent=row.agent, tool=row.tool, prefix=prefix,
                            approval_id=approval_id)
    audit.write(conn, "approval.decided", actor="owner", session_key=row.session_key,
                run_id=row.run_id, detail={"approval": approval_id, "tool": row.tool,
                                           "decision": decision, "prefix": prefix})
    decided = approvals.get(conn, approval_id)
    assert decided is not None
    return decided
