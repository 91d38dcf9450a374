"""Channel cursors with a token: a channel whose position is an opaque string (Matrix's
`since`) keeps it beside the number that orders it, committed with the admission it passes.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("channel_cursors") as table:
        table.add_column(sa.Column("token", sa.String(500)))


def downgrade() -> None:
    with op.batch_alter_table("channel_cursors") as table:
        table.drop_column("token")
