"""Attachments: the files sent with a message, each a row naming its bytes in the chat's folder.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attachments",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("session_key", sa.String(200), sa.ForeignKey("sessions.key"),
                  nullable=False),
        sa.Column("event_seq", sa.Integer),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("content_type", sa.String(100), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("transcript", sa.Text),
    )
    op.create_index("ix_attachments_chat", "attachments", ["session_key", "event_seq"])


def downgrade() -> None:
    op.drop_index("ix_attachments_chat", "attachments")
    op.drop_table("attachments")
