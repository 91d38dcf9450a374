"""Memory: items (facts, preferences, lessons, commitments, document passages) and their
keyword index.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("source", sa.Text),
        sa.Column("written_by", sa.String(200), nullable=False),
        sa.Column("filed_under", sa.String(200)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("recall_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_recalled_at", sa.Float),
    )
    op.create_index("ix_memory_items_fingerprint", "memory_items", ["fingerprint"])
    op.create_index("ix_memory_items_filed_under", "memory_items", ["filed_under"])
    op.create_index("ix_memory_items_source", "memory_items", ["source"])
    op.create_index("ix_memory_items_kind", "memory_items", ["kind", "id"])
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(text, content='memory_items', "
        "content_rowid='id', tokenize='porter unicode61')"
    )
    op.execute(
        "CREATE TRIGGER memory_items_ai AFTER INSERT ON memory_items BEGIN "
        "INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END"
    )
    op.execute(
        "CREATE TRIGGER memory_items_ad AFTER DELETE ON memory_items BEGIN "
        "INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); END"
    )
    op.execute(
        "CREATE TRIGGER memory_items_au AFTER UPDATE OF text ON memory_items BEGIN "
        "INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); "
        "INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("memory_items_ai", "memory_items_ad", "memory_items_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS memory_fts")
    op.drop_table("memory_items")
