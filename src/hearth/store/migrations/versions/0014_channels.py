"""Channels: links between chats and channel threads, the delivery ledger, inbound ids taken
in (so a redelivery is admitted once) and each channel's cursor (Telegram's update offset).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-14
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_CHAT = sa.ForeignKey("sessions.key", ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "channel_links",
        sa.Column("session_key", sa.String(200), _CHAT, primary_key=True),
        sa.Column("channel", sa.String(40), nullable=False),
        sa.Column("thread", sa.String(200), nullable=False),
        sa.Column("owner_dm", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("delivered_seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("channel", "thread", name="uq_channel_links_thread"),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.String(200), sa.ForeignKey("sessions.key", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("channel", sa.String(40), nullable=False),
        sa.Column("thread", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("event_seq", sa.Integer),
        sa.Column("approval_id", sa.String(64)),
        sa.Column("part", sa.Integer, nullable=False, server_default="1"),
        sa.Column("parts", sa.Integer, nullable=False, server_default="1"),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("message_id", sa.String(100)),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("error", sa.Text),
        sa.Column("attempted_at", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Index("ix_deliveries_due", "channel", "status", "id"),
        sa.Index("ix_deliveries_chat", "session_key", "id"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "channel_inbound",
        sa.Column("channel", sa.String(40), primary_key=True),
        sa.Column("inbound_id", sa.String(200), primary_key=True),
        sa.Column("received_at", sa.Float, nullable=False),
    )
    op.create_table(
        "channel_cursors",
        sa.Column("channel", sa.String(40), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("channel_cursors", "channel_inbound", "deliveries", "channel_links"):
        op.drop_table(table)
