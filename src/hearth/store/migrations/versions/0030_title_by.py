"""Who gave a chat its title (`sessions.title_by`): `owner` (a rename), `chore` (the title
chore, from the first exchange), or none (a chat made before this column, an import, a fork,
a helper, a mode's title). Only a title the chore made, or none at all, is made again when the
chat's first message is edited; any other is the owner's and is never overwritten.

Revision ID: 0030
Revises: 0028
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("title_by", sa.String(20)))


def downgrade() -> None:
    # dropped in place (SQLite 3.35+): a batch copy of `sessions` would break the search
    # index's triggers on it
    op.execute("ALTER TABLE sessions DROP COLUMN title_by")
