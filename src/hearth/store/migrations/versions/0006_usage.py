"""Usage: tokens, calls and cost per UTC day and model (totals only: no chat, no text).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_daily",
        sa.Column("day", sa.Text, primary_key=True),  # 'YYYY-MM-DD', UTC
        sa.Column("model_id", sa.String(200), primary_key=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens_in", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens_out", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float),  # NULL: no call of the day was priced
        sa.Column("unpriced_calls", sa.Integer, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("usage_daily")
