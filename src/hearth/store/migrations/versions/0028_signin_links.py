"""One-time sign-in links (`hearth token --link`): one row per link, keyed by the hash of its
code, so a phone signs in by opening a link instead of typing the token.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signin_links",
        sa.Column("key", sa.String(64), primary_key=True),  # sha256 of the link's code, hex
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("used_at", sa.Float, nullable=True),  # the one use that won
    )


def downgrade() -> None:
    op.drop_table("signin_links")
