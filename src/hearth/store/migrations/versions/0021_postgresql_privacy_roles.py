"""The store's privacy locks on PostgreSQL: three roles a restricted chat's work runs as.

SQLite holds the line below SQLAlchemy with its authorizer (`privacy/stores.py`); PostgreSQL
has none, so there each transaction of such work sets a role of less privilege for itself
(`SET LOCAL ROLE`, undone when the transaction ends), and the database refuses what that role
may not do, whatever the statement's spelling:

- `hearth_incognito` (an Incognito chat's work): reads memory, changes no memory table and
  makes no grant or job;
- `hearth_sealed` (a Temporary chat's, or a mode this version does not know): neither reads
  nor changes memory, makes no grant or job;
- `hearth_memoryless` (work whose principal may not use the owner's memory: an app without
  `manage_memory`, a guest): neither reads nor changes memory.

Every other table they may use as the gateway does. Roles belong to the whole server, so the
names are shared by every Hearth database on it; their rights are each database's own. Making
a role needs CREATEROLE: where the gateway's user lacks it, no role is made here and the
gateway refuses restricted work at the store until an administrator runs this migration's
statements (`hearth db check` says so). On SQLite nothing is made here.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04
"""

from alembic import op
from sqlalchemy import text

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

ROLES = ("hearth_incognito", "hearth_sealed", "hearth_memoryless")
LASTING = ("grants", "jobs")  # work that would outlast the chat


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    may = bind.execute(text("SELECT rolsuper OR rolcreaterole FROM pg_roles "
                            "WHERE rolname = current_user")).scalar()
    if not may:
        return  # the gateway refuses restricted work at the store until the roles exist
    for role in ROLES:
        op.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
                   f"THEN CREATE ROLE {role} NOLOGIN; END IF; END $$")
        op.execute(f"GRANT {role} TO current_user")
        op.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
        op.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}")
        # a table a later migration makes is theirs to use too; one of memory's must take
        # the rights back in its own migration (tests/memory: the census of the roles)
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, "
                   f"DELETE ON TABLES TO {role}")
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON "
                   f"SEQUENCES TO {role}")
    memory = [row[0] for row in bind.execute(text(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
        "AND tablename LIKE 'memory\\_%'"))]
    for table in memory:
        op.execute(f"REVOKE INSERT, UPDATE, DELETE ON {table} FROM hearth_incognito")
        op.execute(f"REVOKE ALL ON {table} FROM hearth_sealed, hearth_memoryless")
    for table in LASTING:
        op.execute(f"REVOKE INSERT, UPDATE, DELETE ON {table} FROM hearth_incognito, "
                   "hearth_sealed")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for role in ROLES:
        exists = bind.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                              {"r": role}).scalar()
        if exists:
            op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
            op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role}")
            op.execute(f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM {role}")
            op.execute(f"REVOKE USAGE ON SCHEMA public FROM {role}")
            op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES "
                       f"FROM {role}")
            op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES "
                       f"FROM {role}")
