"""The audit row a change of runtime settings leaves (the Settings page's saves)."""

from __future__ import annotations

from hearth.store import audit
from hearth.store.db import Database


def record_change(db: Database, what: dict[str, str]) -> None:
    """One row per change: what changed, by name (never a key, URL or prompt)."""
    with db.write() as conn:
        audit.write(conn, "settings.changed", actor="owner", detail=what)
