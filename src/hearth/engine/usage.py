"""Usage the surfaces read: model calls, tokens and cost per UTC day and per model."""

from __future__ import annotations

from hearth.store import usage as usage_store
from hearth.store.db import Database, now
from hearth.store.usage import Total

__all__ = ["Total", "today", "totals"]


def today() -> str:
    """Today's UTC day as 'YYYY-MM-DD' (the day usage is counted under)."""
    return usage_store.day_of(now())


def totals(db: Database, since_day: str) -> tuple[list[Total], list[Total]]:
    """The totals since `since_day`: per day, then per model."""
    with db.read() as conn:
        return usage_store.by_day(conn, since_day), usage_store.by_model(conn, since_day)
