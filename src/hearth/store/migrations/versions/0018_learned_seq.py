"""Learning's cursor: each chat keeps the seq its exchanges have been learned up to
(`sessions.learned_seq`), so learning runs when a chat goes idle or every few turns, reading
every exchange since, each once. A chat kept before was learned from after each of its turns:
its cursor starts at its last seq.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("learned_seq", sa.Integer, nullable=False,
                                        server_default="0"))
    op.get_bind().execute(sa.text("UPDATE sessions SET learned_seq = last_seq"))


def downgrade() -> None:
    # dropped in place (SQLite 3.35+): a batch copy of `sessions` would break the search
    # index's triggers on it
    op.execute("ALTER TABLE sessions DROP COLUMN learned_seq")
