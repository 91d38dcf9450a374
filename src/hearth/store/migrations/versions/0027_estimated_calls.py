"""Estimated calls: a model call that ended without its provider's usage report (a stopped
turn, a cut stream) is charged an estimate, and its row says so (`estimated`), so the Usage
page and the spending limits never count such a call as free.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_calls") as table:
        table.add_column(sa.Column("estimated", sa.Boolean, nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as table:
        table.drop_column("estimated")
