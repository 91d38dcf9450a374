"""Branching chats: each event says whether it is on the path from the chat's first message to
its head (`off_path` 0) or left beside it (1: an earlier answer kept as a variant, or what an
edit or a rewind left behind). Derived from the tree (`parent_event_id`, the head) and set
when the head moves; nothing is ever deleted by a move.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("transcript_events") as batch:
        batch.add_column(sa.Column("off_path", sa.Boolean, nullable=False,
                                   server_default=sa.false()))
    op.create_index("ix_events_parent", "transcript_events", ["session_key", "parent_event_id"])


def downgrade() -> None:
    op.drop_index("ix_events_parent", "transcript_events")
    with op.batch_alter_table("transcript_events") as batch:
        batch.drop_column("off_path")
