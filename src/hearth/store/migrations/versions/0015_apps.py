"""Apps: programs given a token of their own, with their permissions; the token kept hashed.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "apps",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("permissions", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("apps")
