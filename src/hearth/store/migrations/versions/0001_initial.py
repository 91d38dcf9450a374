"""The first schema: sessions, transcript_events, runs, tool_calls, audit.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("tab_id", sa.String(64), nullable=False),
        sa.Column("title", sa.Text),
        sa.Column("memory_mode", sa.String(20), nullable=False),
        sa.Column("agent", sa.String(100), nullable=False, server_default="default"),
        sa.Column("model", sa.String(200)),
        sa.Column("workspace_dir", sa.Text),
        sa.Column("created_by_app", sa.String(100)),
        sa.Column("origin", sa.String(50), nullable=False, server_default="api"),
        sa.Column("parent_key", sa.String(200)),
        sa.Column("folder", sa.String(200)),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("pinned", sa.Boolean, nullable=False, server_default="0"),
        sa.Column("archived", sa.Boolean, nullable=False, server_default="0"),
        sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
        sa.Column("head_event_id", sa.String(64)),
        sa.Column("writer_run_id", sa.String(64)),
        sa.Column("chat_number", sa.Integer),
        sa.Column("last_seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("message_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_sessions_chat_number", "sessions", ["chat_number"])
    op.create_index("ix_sessions_updated", "sessions", ["updated_at", "key"])
    op.create_table(
        "transcript_events",
        sa.Column("session_key", sa.String(200), sa.ForeignKey("sessions.key"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(64), nullable=False, unique=True),
        sa.Column("parent_event_id", sa.String(64)),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("content", sa.JSON, nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("source_thread", sa.String(200)),
        sa.Column("source_user", sa.String(200)),
        sa.Column("source_channel", sa.String(100)),
        sa.Column("run_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("session_key", "idempotency_key", name="uq_events_idempotency"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_key", sa.String(200), sa.ForeignKey("sessions.key"), nullable=False),
        sa.Column("tab_id", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("ending", sa.String(50)),
        sa.Column("sentence", sa.Text),
        sa.Column("recovery_attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("model", sa.String(200)),
        sa.Column("user_event_seq", sa.Integer),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("ended_at", sa.Float),
    )
    op.create_index("ix_runs_queue", "runs", ["session_key", "status", "id"])
    op.create_index("ix_runs_status", "runs", ["status", "id"])
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("session_key", sa.String(200), nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments", sa.JSON, nullable=False),
        sa.Column("effect", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("receipt", sa.Text),
        sa.Column("started_at", sa.Float),
        sa.Column("ended_at", sa.Float),
        sa.UniqueConstraint("run_id", "call_id", name="uq_tool_calls_call"),
    )
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("actor", sa.String(100), nullable=False),
        sa.Column("session_key", sa.String(200)),
        sa.Column("run_id", sa.String(64)),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    op.create_index("ix_audit_at", "audit", ["at"])


def downgrade() -> None:
    for table in ("audit", "tool_calls", "runs", "transcript_events", "sessions"):
        op.drop_table(table)
