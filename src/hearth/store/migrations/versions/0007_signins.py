"""Dashboard sign-ins: one row per signed-in cookie, so signing out revokes that cookie.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signins",
        sa.Column("key", sa.String(64), primary_key=True),  # sha256 of the cookie's id, hex
        sa.Column("issued_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("signins")
