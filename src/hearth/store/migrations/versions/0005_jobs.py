"""Scheduled jobs: a prompt fired into the job's own chat once or on a fixed interval.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("every_seconds", sa.Integer),
        sa.Column("next_at", sa.Float, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default="1"),
        sa.Column("session_key", sa.String(200), nullable=False),
        sa.Column("made_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_fired_at", sa.Float),
        sqlite_autoincrement=True,  # a deleted job's id (and chat name) is never handed out again
    )
    op.create_index("ix_jobs_due", "jobs", ["enabled", "next_at"])


def downgrade() -> None:
    op.drop_table("jobs")
