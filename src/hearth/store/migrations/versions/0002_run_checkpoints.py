"""Runs keep a checkpoint of the answer streaming when the process died.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("partial_text", sa.Text))
        batch.add_column(sa.Column("partial_at", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("partial_at")
        batch.drop_column("partial_text")
