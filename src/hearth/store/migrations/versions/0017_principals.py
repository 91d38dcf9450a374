"""Principals: on whose behalf each run, job and approval is (`owner`, `app:<name>`,
`guest:<channel>:<user>`). Runs, jobs and approvals kept before are given theirs from what
was known of them: a run of a chat an app started is that app's, a run answering a channel
guest's line (`meta.guest`) is that guest's, a job made in an app's chat is that app's.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("principal", sa.String(300), nullable=False,
                                    server_default="owner"))
    op.add_column("jobs", sa.Column("principal", sa.String(300), nullable=False,
                                    server_default="owner"))
    op.add_column("approvals", sa.Column("principal", sa.String(300), nullable=False,
                                         server_default="owner"))
    bind = op.get_bind()
    bind.execute(sa.text(
        "UPDATE runs SET principal = 'app:' || (SELECT s.created_by_app FROM sessions s "
        "WHERE s.key = runs.session_key) WHERE session_key IN "
        "(SELECT key FROM sessions WHERE created_by_app IS NOT NULL)"))
    bind.execute(sa.text(
        "UPDATE jobs SET principal = 'app:' || (SELECT s.created_by_app FROM sessions s "
        "WHERE s.key = jobs.made_by) WHERE made_by IN "
        "(SELECT key FROM sessions WHERE created_by_app IS NOT NULL)"))
    _guests(bind)
    bind.execute(sa.text(
        "UPDATE approvals SET principal = (SELECT r.principal FROM runs r "
        "WHERE r.run_id = approvals.run_id) WHERE run_id IN (SELECT run_id FROM runs)"))


def _guests(bind: sa.Connection) -> None:
    """Runs answering a guest's line: theirs (the line's `meta.guest`, its channel and user)."""
    rows = bind.execute(sa.text(
        "SELECT r.run_id, e.meta, e.source_channel, e.source_user FROM runs r "
        "JOIN transcript_events e ON e.session_key = r.session_key "
        "AND e.seq = r.user_event_seq WHERE CAST(e.meta AS TEXT) LIKE '%\"guest\"%'")).all()
    for run_id, meta, channel, user in rows:
        try:
            found = json.loads(meta) if isinstance(meta, str) else meta
        except ValueError:
            found = None
        if not isinstance(found, dict) or "guest" not in found:
            continue
        principal = f"guest:{channel or 'unknown'}:{user or 'unknown'}"
        bind.execute(sa.text("UPDATE runs SET principal = :p WHERE run_id = :r"),
                     {"p": principal, "r": run_id})


def downgrade() -> None:
    for table in ("approvals", "jobs", "runs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("principal")
