"""The per-call record: one row of `model_calls` per model call, and nothing else.

Owns the row's shape (`CallRow`) and its one write (`insert`). The row names the model, its
provider, the caller's purpose and the call's outcome, its tokens, cost and duration, and the
chat's key only for a persistent chat; it holds no text, ever. What the rows add up to is
read in `store.usage`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import Connection, func, insert, select

from hearth.store.schema import model_calls
from hearth.store.usage import day_of

OUTCOMES = ("ok", "failed", "timeout", "cut_off", "output_cap", "refused")


@dataclass(frozen=True)
class CallRow:
    """One model call as recorded. `cost_usd` None: the model has no price (never 0)."""

    created_at: float
    model_id: str
    provider: str
    purpose: str
    outcome: str
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    duration_ms: int
    session_key: str | None  # a persistent chat's only
    agent: str | None = None  # whom it was spent for (models.spending.Account)
    app: str | None = None
    job: int | None = None
    estimated: bool = False  # no usage was reported: its tokens and cost are an estimate


def spent_since(conn: Connection, since_day: str
                ) -> list[tuple[str, str | None, str | None, int | None, float]]:
    """What priced calls cost from `since_day` on, per day, agent, app and job (the spending
    limits' tally starts from it)."""
    c = model_calls.c
    rows = conn.execute(select(c.day, c.agent, c.app, c.job, func.sum(c.cost_usd))
                        .where(c.day >= since_day, c.cost_usd.is_not(None))
                        .group_by(c.day, c.agent, c.app, c.job))
    return [(str(r[0]), r[1], r[2], r[3], float(r[4] or 0.0)) for r in rows]


def insert_call(conn: Connection, row: CallRow) -> None:
    """Write one call's row (bookkeeping: its caller writes it with `durable=False`)."""
    if row.outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {row.outcome!r}")
    conn.execute(insert(model_calls).values(**asdict(row), day=day_of(row.created_at)))


def made_since(conn: Connection, since: float, purposes: tuple[str, ...]) -> list[float]:
    """When each call for one of `purposes` was made since `since` (a row of several calls,
    the earlier days' carried totals, counts as its calls, at its time)."""
    rows = conn.execute(select(model_calls.c.created_at, model_calls.c.calls).where(
        model_calls.c.created_at > since, model_calls.c.purpose.in_(purposes)))
    return [float(at) for at, calls in rows for _ in range(max(1, int(calls or 1)))]
