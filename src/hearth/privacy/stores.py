"""Enforcement at the store: inside a restricted scope the memory tables, and the tables of
work that outlasts a chat (standing grants, scheduled jobs), refuse every change.

Two locks on the one door. Every statement SQLAlchemy sends is screened before it runs (any
database): a change to one of those tables from work that keeps nothing raises
`RestrictedSession`.
On SQLite the connection's authorizer holds the same line below SQLAlchemy — raw SQL, a
trigger, a CTE-prefixed write — and, for work that may read no memory (Temporary,
unreadable), refuses reads of those tables too. On PostgreSQL a role of less privilege does
(migration 0021: each such transaction begins with `SET LOCAL ROLE`). Work whose principal
may not use the owner's memory (an app without `manage_memory`, a guest) is refused the
memory tables both ways, in any mode. SQLite consults the authorizer when it prepares a
statement, and cached statements are not prepared again; setting an authorizer expires every
prepared statement, so the authorizer is set afresh whenever a transaction begins in a
different scope than the connection last served.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, event

from hearth.privacy import reach, scope as work_scope
from hearth.privacy.modes import Mode, keeps_memory, reads_memory
from hearth.store.db import Database
from hearth.store.memory import TABLE_PREFIX

_CHANGE = re.compile(
    r"^\s*(?:WITH\b.*?\)\s*)?"
    r"(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)"
    r"\s+[\"`\[]?(\w+)",
    re.IGNORECASE | re.DOTALL,
)
_WRITES = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
LASTING_TABLES = frozenset({"grants", "jobs"})  # work that outlasts the chat that made it
_STATE = "hearth_authorizer"  # on the pooled connection's info: the mode it was set for
_ROLES = "hearth_roles"  # on a PostgreSQL pooled connection's info: the roles it may take


def changed_table(statement: str) -> str | None:
    """The table a statement changes (lower-cased), or None for a statement that changes
    none."""
    found = _CHANGE.match(statement)
    return found.group(1).lower() if found is not None else None


def changes_memory(statement: str) -> bool:
    table = changed_table(statement)
    return table is not None and table.startswith(TABLE_PREFIX)


def protect(db: Database) -> None:
    """Install both locks on `db` (idempotent)."""
    if event.contains(db.engine, "before_cursor_execute", _screen):
        return
    event.listen(db.engine, "before_cursor_execute", _screen, retval=False)
    if db.dialect == "sqlite":
        event.listen(db.engine, "begin", _set_authorizer)
    elif db.dialect == "postgresql":
        event.listen(db.engine, "begin", _set_role)


def _screen(_conn: Connection, _cursor: Any, statement: str, *_args: Any) -> None:
    table = changed_table(statement)
    if table is None:
        return
    refusal = None
    if table.startswith(TABLE_PREFIX):
        refusal = reach.write_refusal()
    elif table in LASTING_TABLES:
        refusal = reach.lasting_refusal("work that would outlast it")
    if refusal is not None:
        raise reach.RestrictedSession(refusal)


def _set_authorizer(conn: Connection) -> None:
    scope = work_scope.current()
    mode = None if scope is None or keeps_memory(scope.mode) else scope.mode
    state = (mode, scope is not None and not scope.memory)
    record = conn.connection  # the pooled connection: its info outlives this checkout
    if record.info.get(_STATE, (None, False)) == state:
        return
    raw = record.dbapi_connection
    assert raw is not None
    raw.set_authorizer(None if state == (None, False) else _authorizer(*state))
    record.info[_STATE] = state


def role_for(mode: Mode | None, no_memory: bool) -> str | None:
    """The PostgreSQL role restricted work runs as (migration 0021), None for the owner's
    own work and a persistent chat's: the same line as `_authorizer`'s."""
    if mode is not None and not reads_memory(mode):
        return "hearth_sealed"
    if mode is not None:
        return "hearth_sealed" if no_memory else "hearth_incognito"
    return "hearth_memoryless" if no_memory else None


def _set_role(conn: Connection) -> None:
    """PostgreSQL: the transaction of restricted work takes its role of less privilege
    (`SET LOCAL ROLE`, undone when the transaction ends). Where the role was never made (no
    CREATEROLE when migrating), such work is refused here: the line holds closed."""
    scope = work_scope.current()
    mode = None if scope is None or keeps_memory(scope.mode) else scope.mode
    role = role_for(mode, scope is not None and not scope.memory)
    if role is None:
        return
    taken = conn.connection.info.setdefault(_ROLES, set())  # the pooled connection's
    if role not in taken and conn.exec_driver_sql(
            f"SELECT pg_has_role(current_user, '{role}', 'USAGE') "
            f"FROM pg_roles WHERE rolname = '{role}'").scalar():
        taken.add(role)  # asked once a connection: a role made is not taken away in use
    if role not in taken:
        raise reach.RestrictedSession(
            f"This work keeps nothing, and the database cannot hold it to that: its role "
            f"{role} is missing (run `hearth db check`).")
    conn.exec_driver_sql(f"SET LOCAL ROLE {role}")


def _authorizer(mode: Mode | None, no_memory: bool) -> Callable[..., int]:
    """Restricted work (`mode`) may change no memory, grant or job, and reads no memory when
    its mode reads none; work whose principal may not use the memory (`no_memory`) neither
    reads nor changes it."""
    no_reads = no_memory or (mode is not None and not reads_memory(mode))
    lasting_locked = mode is not None

    def decide(action: int, table: str | None, *_rest: Any) -> int:
        name = (table or "").lower()
        if name in LASTING_TABLES:
            locked = lasting_locked and action in _WRITES
            return sqlite3.SQLITE_DENY if locked else sqlite3.SQLITE_OK
        if not name.startswith(TABLE_PREFIX):
            return sqlite3.SQLITE_OK
        if action in _WRITES or (no_reads and action == sqlite3.SQLITE_READ):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    return decide
