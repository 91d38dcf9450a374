"""Standing grants as the owner manages them: the list (newest first, each with the chat whose
approval left it, while that approval is kept) and revoking one. A revoked grant covers no
call from then on: the next call it would have covered is asked about again (the gate reads
the grants at every call). Revoking writes an audit row naming the grant's tool, agent and
prefix; a grant never comes from a chat that keeps nothing (the approval desk refuses to
make one), so its prefix is the owner's kept work, masked like every audit detail."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.reads.views import iso
from hearth.errors import Refusal
from hearth.store import approvals, audit
from hearth.store.approvals import GrantRow
from hearth.store.db import Database


def grant_view(row: GrantRow) -> dict[str, Any]:
    return {"id": row.id, "tool": row.tool, "agent": row.agent, "prefix": row.prefix,
            "created_at": iso(row.created_at), "approval_id": row.approval_id,
            "session": row.session_key}


async def list_grants(db: Database) -> list[dict[str, Any]]:
    """Every standing grant, newest first."""
    return [grant_view(row) for row in await db.reading(approvals.list_grants)]


async def revoke_grant(db: Database, grant_id: int) -> dict[str, Any]:
    """Remove the grant `grant_id` (404 `grant_not_found`); the grant it was."""
    return grant_view(await db.writing(_revoke, grant_id))


def _revoke(conn: Connection, grant_id: int) -> GrantRow:
    gone = approvals.revoke_grant(conn, grant_id)
    if gone is None:
        raise Refusal("grant_not_found", 404, f"There is no standing grant {grant_id}.")
    audit.write(conn, "grant.revoked", actor="owner",
                detail={"grant": gone.id, "tool": gone.tool, "agent": gone.agent,
                        "prefix": gone.prefix, "approval": gone.approval_id})
    return gone
