"""Read-only questions a chat's page asks of the engine's records: which run holds the chat
and which wait behind it, the approvals pending in it, and which chat a run or an approval
belongs to."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.turn.approvals import approval_view
from hearth.store import approvals, runs as run_store, sessions as session_store
from hearth.store.db import Database


def _queued(conn: Connection, key: str, run_ids: set[str]) -> tuple[str | None, set[str]]:
    """The run holding the chat, and which of these runs wait behind it (admitted)."""
    session = session_store.get(conn, key)
    running = session.writer_run_id if session is not None else None
    if running is None:
        return None, set()
    runs = (run_store.get(conn, r) for r in run_ids)
    return running, {run.run_id for run in runs if run is not None and run.status == "admitted"}


async def of_chat(db: Database, key: str, run_ids: set[str]
                  ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
    """The run holding the chat, which of `run_ids` wait behind it, and the chat's pending
    approvals (as `engine.turn.approvals.approval_view` shows them)."""
    return await db.reading(_of_chat, key, run_ids)


def _of_chat(conn: Connection, key: str, run_ids: set[str]
             ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
    running, queued = _queued(conn, key, run_ids)
    pending = [approval_view(a) for a in approvals.pending(conn) if a.session_key == key]
    return running, queued, pending


async def is_queued(db: Database, key: str, run_id: str | None) -> bool:
    """A message waits behind another turn: its run is admitted and another holds the chat."""
    if run_id is None:
        return False
    _, queued = await db.reading(_queued, key, {run_id})
    return run_id in queued


async def approval_chat(db: Database, approval_id: str) -> str | None:
    """The key of the chat an approval was asked in; None when there is no such approval."""
    row = await db.reading(approvals.get, approval_id)
    return None if row is None else row.session_key


async def run_chat(db: Database, run_id: str) -> str | None:
    """The key of the chat a run belongs to; None when there is no such run."""
    run = await db.reading(run_store.get, run_id)
    return None if run is None else run.session_key
