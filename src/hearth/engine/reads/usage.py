"""Usage the surfaces read: model calls, tokens and cost per UTC day, model, provider, purpose
and outcome, added up from the per-call record (`store.usage` over `model_calls`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from hearth.store import usage as usage_store
from hearth.store.db import Database, now
from hearth.store.usage import Total

__all__ = ["Total", "Totals", "today", "totals"]


@dataclass(frozen=True)
class Totals:
    """One span's totals, each list over the same calls (so each adds up to the same sum)."""

    by_day: list[Total]
    by_model: list[Total]
    by_provider: list[Total]
    by_purpose: list[Total]
    by_outcome: list[Total]


def today() -> str:
    """Today's UTC day as 'YYYY-MM-DD' (the day usage is counted under)."""
    return usage_store.day_of(now())


async def totals(db: Database, since_day: str) -> Totals:
    """The totals since `since_day`, read in one snapshot."""
    return await db.reading(_totals, since_day)


def _totals(conn: Connection, since_day: str) -> Totals:
    return Totals(*(usage_store.totals_by(conn, axis, since_day) for axis in usage_store.AXES))
