"""Job schedules: a cron expression in an IANA time zone besides the fixed interval, and what a
job does with fires missed while the gateway was down (`once`: one catch-up run; `skip`).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("cron", sa.String(200)))
    op.add_column("jobs", sa.Column("timezone", sa.String(64)))
    op.add_column("jobs", sa.Column("missed", sa.String(10), nullable=False,
                                    server_default="once"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("missed")
        batch.drop_column("timezone")
        batch.drop_column("cron")
