"""Model calls: one row per model call (model, provider, purpose, outcome, tokens, cost,
duration, the chat's key only for a persistent chat; never any text). It replaces the daily
totals table `usage_daily`, whose rows are carried over as rows of purpose "earlier" that keep
their day's count of calls (`calls`), so the Usage page's history is unchanged; a downgrade
adds the calls up into daily totals again.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

EARLIER = "earlier"  # the purpose of a row carried over from the daily totals
NOON = 43_200.0  # a carried row is stamped at its day's noon, UTC


def upgrade() -> None:
    op.create_table(
        "model_calls",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("day", sa.String(10), nullable=False),  # 'YYYY-MM-DD', UTC
        sa.Column("model_id", sa.String(200), nullable=False),
        sa.Column("provider", sa.String(50), nullable=False),
        sa.Column("purpose", sa.String(30), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("tokens_in", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens_out", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float),  # NULL: the model has no price (never 0 for that)
        sa.Column("duration_ms", sa.Integer, nullable=False, server_default="0"),
        sa.Column("session_key", sa.String(200)),  # a persistent chat's only
        sa.Column("calls", sa.Integer, nullable=False, server_default="1"),
    )
    op.create_index("ix_model_calls_day_model", "model_calls", ["day", "model_id"])
    op.create_index("ix_model_calls_session", "model_calls", ["session_key"])
    conn = op.get_bind()
    daily = conn.execute(sa.text(
        "SELECT day, model_id, calls, tokens_in, tokens_out, cost_usd, unpriced_calls "
        "FROM usage_daily")).all()
    calls = sa.table("model_calls", *(sa.column(name) for name in (
        "created_at", "day", "model_id", "provider", "purpose", "outcome", "tokens_in",
        "tokens_out", "cost_usd", "duration_ms", "calls")))
    carried = []
    for day, model_id, count, tokens_in, tokens_out, cost, unpriced in daily:
        stamp = _noon_of(day)
        base = {"created_at": stamp, "day": day, "model_id": model_id, "provider": "unknown",
                "purpose": EARLIER, "outcome": "ok", "duration_ms": 0}
        priced = count - unpriced
        if priced > 0:  # the priced calls carry the day's tokens and its cost
            carried.append({**base, "tokens_in": tokens_in, "tokens_out": tokens_out,
                            "cost_usd": cost if cost is not None else 0.0, "calls": priced})
        if unpriced > 0:
            first = priced <= 0
            carried.append({**base, "tokens_in": tokens_in if first else 0,
                            "tokens_out": tokens_out if first else 0, "cost_usd": None,
                            "calls": unpriced})
    if carried:
        op.bulk_insert(calls, carried)
    op.drop_table("usage_daily")


def downgrade() -> None:
    op.create_table(
        "usage_daily",
        sa.Column("day", sa.Text, primary_key=True),
        sa.Column("model_id", sa.String(200), primary_key=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens_in", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens_out", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float),
        sa.Column("unpriced_calls", sa.Integer, nullable=False, server_default="0"),
    )
    op.execute(
        "INSERT INTO usage_daily (day, model_id, calls, tokens_in, tokens_out, cost_usd, "
        "unpriced_calls) SELECT day, model_id, SUM(calls), SUM(tokens_in), SUM(tokens_out), "
        "SUM(cost_usd), SUM(CASE WHEN cost_usd IS NULL THEN calls ELSE 0 END) "
        "FROM model_calls GROUP BY day, model_id")
    op.drop_index("ix_model_calls_session", "model_calls")
    op.drop_index("ix_model_calls_day_model", "model_calls")
    op.drop_table("model_calls")


def _noon_of(day: str) -> float:
    from datetime import UTC, datetime

    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() + NOON
