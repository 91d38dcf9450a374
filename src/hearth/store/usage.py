"""What the model calls add up to: calls, tokens and cost per UTC day, model, provider,
purpose or outcome, read from the per-call record (`model_calls`, written by
`store.model_calls`).

A total's cost sums its priced calls (None when none was priced); its calls at no known price
count in `unpriced_calls`, so an unpriced model never reads as free. A row carried over from
the daily totals the record replaced counts its day's calls (`calls`); every other row is one
call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, case, func, select

from hearth.store.schema import model_calls

PER_MTOK = 1_000_000
AXES = ("day", "model_id", "provider", "purpose", "outcome")


@dataclass(frozen=True)
class Total:
    """Calls, tokens and cost of one day, model, provider, purpose or outcome over a span."""

    key: str
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


def by_day(conn: Connection, since_day: str) -> list[Total]:
    """Each day from `since_day` on with a call, oldest first, every model added up."""
    return totals_by(conn, "day", since_day)


def by_model(conn: Connection, since_day: str) -> list[Total]:
    """Each model called from `since_day` on, by name, every day added up."""
    return totals_by(conn, "model_id", since_day)


def totals_by(conn: Connection, axis: str, since_day: str) -> list[Total]:
    """The calls from `since_day` on added up per value of `axis` (one of AXES), by value."""
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}")
    c = model_calls.c
    key = c[axis]
    unpriced = func.sum(case((c.cost_usd.is_(None), c.calls), else_=0))
    rows = conn.execute(
        select(key, func.sum(c.calls), func.sum(c.tokens_in), func.sum(c.tokens_out),
               func.sum(c.cost_usd), unpriced)
        .where(c.day >= since_day).group_by(key).order_by(key)
    )
    return [Total(str(r[0]), int(r[1] or 0), int(r[2] or 0), int(r[3] or 0),
                  None if r[4] is None else float(r[4]), int(r[5] or 0)) for r in rows]
