"""Spending: each model call names the account it was spent for (the agent of its chat, the
app it ran for, the job that fired it), so spending limits per agent, app and job add up
from the record after a restart as they did before it.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_calls") as table:
        table.add_column(sa.Column("agent", sa.String(80)))
        table.add_column(sa.Column("app", sa.String(80)))
        table.add_column(sa.Column("job", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as table:
        table.drop_column("job")
        table.drop_column("app")
        table.drop_column("agent")
