"""What `hearth db check` reports of a database: that it answers, where its schema stands, and
the settings its durability rests on, each a finding with a sentence a person can act on.

Nothing is changed: no migration runs (a database behind says to run `hearth db upgrade`),
no setting is written. A setting that would let an acknowledged message be lost on a crash is
a problem: SQLite's journal not in WAL mode; PostgreSQL's `fsync` off, or its
`synchronous_commit` off or `local` on a server that has standbys it should wait for is left
to its owner (only `off` is flagged: it acknowledges before the commit is on disk)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from hearth.store import migrate


@dataclass(frozen=True)
class Finding:
    name: str  # what was looked at: connection, schema, a setting
    ok: bool
    sentence: str


def shown_url(url: str) -> str:
    """The URL without its password."""
    return make_url(url).render_as_string(hide_password=True)


def check(url: str) -> list[Finding]:
    """The findings for the database at `url`; a database that does not answer gives that
    one finding alone. A SQLite file that is not there is not made."""
    where = make_url(url)
    if where.get_backend_name() == "sqlite" and where.database and \
            not Path(where.database).exists():
        return [Finding("connection", False, f"There is no database at {where.database} yet: "
                                             "run `hearth db upgrade` or start the gateway.")]
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = [Finding("connection", True, f"{_server(conn)} answers at {shown_url(url)}.")]
            found.append(_schema(conn))
            found += _settings(conn)
            return found
    except (SQLAlchemyError, OSError) as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0][:200]
        return [Finding("connection", False,
                        f"The database at {shown_url(url)} does not answer: {reason}")]
    finally:
        engine.dispose()


def _server(conn: Connection) -> str:
    if conn.dialect.name == "sqlite":
        return f"SQLite {conn.exec_driver_sql('SELECT sqlite_version()').scalar_one()}"
    version = conn.exec_driver_sql("SHOW server_version").scalar_one()
    return f"PostgreSQL {str(version).split()[0]}"


def _schema(conn: Connection) -> Finding:
    head = migrate.head_revision()
    try:
        versions = list(conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())
    except DBAPIError:
        conn.rollback()
        versions = []
    if versions == [head]:
        return Finding("schema", True, f"The schema is current (migration {head}).")
    if not versions:
        return Finding("schema", False, "The database has no schema yet: run `hearth db "
                                        "upgrade` (or start the gateway, which does it).")
    known = {path.stem.split("_", 1)[0] for path in migrate.VERSIONS.glob("*.py")}
    at = ", ".join(versions)
    if all(v in known for v in versions):
        return Finding("schema", False, f"The schema is behind (migration {at}, this Hearth's "
                                        f"is {head}): run `hearth db upgrade`.")
    return Finding("schema", False, f"The schema is at migration {at}, which this Hearth does "
                                    "not know: a newer Hearth made it. Run that version.")


def _settings(conn: Connection) -> list[Finding]:
    if conn.dialect.name == "sqlite":
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()).lower()
        return [Finding("journal_mode", mode == "wal",
                        "journal_mode is wal." if mode == "wal" else
                        f"journal_mode is {mode}, not wal: the gateway sets it at start; a "
                        "database another program changed should be opened by the gateway.")]
    return [*_durability(conn), _roles(conn)]


ROLES = ("hearth_incognito", "hearth_sealed", "hearth_memoryless")


def _roles(conn: Connection) -> Finding:
    """PostgreSQL: the roles restricted work runs as (migration 0021), and this user's right
    to take them; without them such work is refused at the store."""
    missing = [role for role in ROLES if not conn.execute(text(
        "SELECT pg_has_role(current_user, rolname, 'USAGE') FROM pg_roles "
        "WHERE rolname = :r"), {"r": role}).scalar()]
    if not missing:
        return Finding("privacy roles", True, "The roles Incognito and Temporary chats' work "
                                              "runs as are there.")
    return Finding("privacy roles", False, f"The roles {', '.join(missing)} are missing (or "
                   "this user may not take them), so Incognito and Temporary chats are refused "
                   "at the store. A user with CREATEROLE must run the statements of "
                   "migration 0021 (store/migrations/versions/0021_postgresql_privacy_roles.py).")


def _durability(conn: Connection) -> list[Finding]:
    fsync = str(conn.exec_driver_sql("SHOW fsync").scalar_one())
    commit = str(conn.exec_driver_sql("SHOW synchronous_commit").scalar_one())
    return [
        Finding("fsync", fsync == "on", "fsync is on." if fsync == "on" else
                "fsync is off: a crash of the server can lose or corrupt what was committed, "
                "acknowledged messages included. Set fsync = on in postgresql.conf."),
        Finding("synchronous_commit", commit != "off",
                f"synchronous_commit is {commit}." if commit != "off" else
                "synchronous_commit is off: the server acknowledges a commit before it is on "
                "disk, so a message Hearth acknowledged can be lost. Set it to on."),
    ]
