"""Approvals asked of the owner, standing grants, and a chat's trust setting.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("trust", sa.String(20), nullable=False,
                                   server_default="ask"))
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("session_key", sa.String(200), nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("agent", sa.String(100), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments", sa.JSON, nullable=False),
        sa.Column("effect", sa.String(20), nullable=False),
        sa.Column("target", sa.Text),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("decision", sa.String(20)),
        sa.Column("prefix", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("decided_at", sa.Float),
        sa.UniqueConstraint("run_id", "call_id", name="uq_approvals_call"),
    )
    op.create_index("ix_approvals_status", "approvals", ["status", "created_at"])
    op.create_table(
        "grants",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("agent", sa.String(100), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("prefix", sa.Text),
        sa.Column("approval_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_grants_agent_tool", "grants", ["agent", "tool"])


def downgrade() -> None:
    op.drop_table("grants")
    op.drop_table("approvals")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("trust")
