"""Read-only questions the surfaces ask of the engine's records (runs, receipts, replay)."""

from __future__ import annotations

from typing import Any

from hearth.engine.views import run_view
from hearth.store import ledger, transcript
from hearth.store import runs as run_store
from hearth.store.db import Database
from hearth.store.transcript import EventRow


def run_status(db: Database, run_id: str) -> dict[str, Any] | None:
    with db.read() as conn:
        run = run_store.get(conn, run_id)
        if run is None:
            return None
        calls = ledger.for_run(conn, run_id)
    return run_view(run, calls)


def events_after(db: Database, session_key: str, after_seq: int, limit: int) -> list[EventRow]:
    with db.read() as conn:
        return transcript.after(conn, session_key, after_seq, limit)


def current_run(db: Database, session_key: str) -> str | None:
    with db.read() as conn:
        run = run_store.current(conn, session_key)
    return run.run_id if run else None
