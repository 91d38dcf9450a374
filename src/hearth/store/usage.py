"""The usage aggregate: model calls, tokens and cost added up per UTC day and model.

`record` adds one model call to its day's row (an upsert: the first call of a day and model
makes the row). The cost is added only when both of the model's prices are known; a call of a
model with no price counts in `unpriced_calls` instead, so an unpriced model never reads as
free. Rows are totals: no chat, no run, no text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.sql.elements import ColumnElement

from hearth.store.schema import usage_daily

PER_MTOK = 1_000_000


@dataclass(frozen=True)
class Total:
    """Calls, tokens and cost of one day or one model over a span."""

    key: str  # the day ('YYYY-MM-DD') or the model id
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None  # None: no call of it was priced
    unpriced_calls: int


def day_of(stamp: float) -> str:
    """The UTC day of a UNIX time, as 'YYYY-MM-DD'."""
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d")


def cost_of(tokens_in: int, tokens_out: int, price_in_per_mtok: float | None,
            price_out_per_mtok: float | None) -> float | None:
    """US dollars for one call, or None when either price is unknown."""
    if price_in_per_mtok is None or price_out_per_mtok is None:
        return None
    return (tokens_in * price_in_per_mtok + tokens_out * price_out_per_mtok) / PER_MTOK


def record(conn: Connection, *, model_id: str, tokens_in: int, tokens_out: int,
           price_in_per_mtok: float | None, price_out_per_mtok: float | None,
           now: float) -> None:
    """Add one model call to its day's row for the model."""
    cost = cost_of(tokens_in, tokens_out, price_in_per_mtok, price_out_per_mtok)
    row = _insert_of(conn)(usage_daily).values(
        day=day_of(now), model_id=model_id, calls=1, tokens_in=tokens_in,
        tokens_out=tokens_out, cost_usd=cost, unpriced_calls=0 if cost is not None else 1,
    )
    kept = usage_daily.c
    added: dict[str, Any] = {
        "calls": kept.calls + 1,
        "tokens_in": kept.tokens_in + tokens_in,
        "tokens_out": kept.tokens_out + tokens_out,
    }
    if cost is None:
        added["unpriced_calls"] = kept.unpriced_calls + 1
    else:
        added["cost_usd"] = func.coalesce(kept.cost_usd, 0.0) + cost
    conn.execute(row.on_conflict_do_update(index_elements=[kept.day, kept.model_id],
                                           set_=added))


def by_day(conn: Connection, since_day: str) -> list[Total]:
    """Each day from `since_day` on with a call, oldest first, every model added up."""
    return _totals(conn, usage_daily.c.day, since_day)


def by_model(conn: Connection, since_day: str) -> list[Total]:
    """Each model called from `since_day` on, by name, every day added up."""
    return _totals(conn, usage_daily.c.model_id, since_day)


def _totals(conn: Connection, key: ColumnElement[str], since_day: str) -> list[Total]:
    c = usage_daily.c
    rows = conn.execute(
        select(key, func.sum(c.calls), func.sum(c.tokens_in), func.sum(c.tokens_out),
               func.sum(c.cost_usd), func.sum(c.unpriced_calls))
        .where(c.day >= since_day).group_by(key).order_by(key)
    )
    return [Total(str(r[0]), int(r[1] or 0), int(r[2] or 0), int(r[3] or 0),
                  None if r[4] is None else float(r[4]), int(r[5] or 0)) for r in rows]


def _insert_of(conn: Connection) -> Any:
    """The dialect's INSERT, which knows ON CONFLICT (imported when first asked)."""
    if conn.dialect.name.startswith("postgres"):
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert
