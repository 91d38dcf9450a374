"""Owed chore reasons: an owed chore keeps the sentence saying why no model could do it at its
last try (each model's failure in a few words, never an answer's text), so the page listing
what was not done says why, not only the log.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("owed_chores") as table:
        table.add_column(sa.Column("reason", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("owed_chores") as table:
        table.drop_column("reason")
