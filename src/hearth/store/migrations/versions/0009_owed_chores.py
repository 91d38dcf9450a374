"""Owed chores: a background chore (a chat's title, after-turn learning, …) no model could do,
kept so it is tried again later, across restarts too.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "owed_chores",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(40), nullable=False),  # title | learning | …
        sa.Column("session_key", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(64)),  # the turn whose exchange it reads
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_at", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Index("ix_owed_chores_due", "next_at"),
        sa.Index("ix_owed_chores_session", "session_key"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("owed_chores")
