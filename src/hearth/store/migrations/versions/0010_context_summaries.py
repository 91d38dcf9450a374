"""Context summaries: a chat's compacted view for its model (derived; the transcript is
untouched), one row per compaction or idle summary, removed with the chat.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "context_summaries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.String(200),
                  sa.ForeignKey("sessions.key", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),  # compaction | idle
        sa.Column("head_through", sa.Integer, nullable=False),
        sa.Column("through_seq", sa.Integer, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("asks", sa.JSON, nullable=False),
        sa.Column("model_id", sa.String(200)),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_context_summaries_chat", "context_summaries", ["session_key", "id"])


def downgrade() -> None:
    op.drop_index("ix_context_summaries_chat", "context_summaries")
    op.drop_table("context_summaries")
