"""Runs remember where in their chat they ended: `ended_seq`, the chat's last seq when the
ending was written (its notice included), so a stream reconnecting with `after=N` can replay
the `done` of every run that ended after N. Runs that ended before this migration have none
and are not replayed.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("ended_seq", sa.Integer))
        batch.create_index("ix_runs_ended", ["session_key", "ended_seq"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_ended")
        batch.drop_column("ended_seq")
