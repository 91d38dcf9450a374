"""Several gateways on one database: the replicas, their leases, and who runs each run.

`replicas` holds one row per gateway serving the database, renewed by its heartbeat;
`leases` the named leases one replica holds at a time (the leader's); `runs.replica` the
replica running a run, so a dead replica's runs are taken back by another, and only those
(`store/replicas.py`). On SQLite, one gateway per database, they stay empty but for its own row.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("place", sa.String(500), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("beat_at", sa.Float, nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("until_at", sa.Float, nullable=False),
    )
    op.add_column("runs", sa.Column("replica", sa.String(64)))


def downgrade() -> None:
    # dropped in place (SQLite 3.35+), as 0018 does
    op.execute("ALTER TABLE runs DROP COLUMN replica")
    op.drop_table("leases")
    op.drop_table("replicas")
