"""Memory's keyword recall on PostgreSQL: a GIN index of each item's words.

SQLite recalls through its FTS5 index `memory_fts` (migration 0004: the `porter` stemmer over
`unicode61`); PostgreSQL gets the same from an expression index, `to_tsvector('english',
text)` (English stemming, as porter's), that `store/recall.py` matches and ranks by `ts_rank`.
An item is memory, never a restricted chat's words (restricted work writes no memory), so
indexing every row is right. On SQLite nothing is made here.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE INDEX ix_memory_items_words ON memory_items "
               "USING gin (to_tsvector('english', text))")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_memory_items_words")
