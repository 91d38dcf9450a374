"""Deliveries found by the channel's id for what was sent (`channel`, `message_id`): a Matrix
reaction or reply to a message the bot sent before a restart is known by it.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_deliveries_sent_as", "deliveries", ["channel", "message_id"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_sent_as", table_name="deliveries")
