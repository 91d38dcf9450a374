"""The schema's version: whether the database is at the newest migration, without Alembic.

Importing Alembic costs a few hundred milliseconds, so a start where the schema is already
current asks only this: the head revision is read from the migration files themselves (the
one revision no other names as its `down_revision`) and compared with the database's
`alembic_version` row. Anything else (no table yet, an older or unknown version, several
heads) falls through to Alembic, which decides.
"""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

VERSIONS = Path(__file__).parent / "migrations" / "versions"
_REVISION = re.compile(r'^revision\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)
_DOWN = re.compile(r'^down_revision\s*=\s*(?:["\']([^"\']+)["\']|None)', re.MULTILINE)


def head_revision(folder: Path = VERSIONS) -> str | None:
    """The newest migration's revision; None when the files do not name exactly one head."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in folder.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is None or down is None:
            return None  # a file this reader does not understand: let Alembic decide
        revisions.add(revision.group(1))
        if down.group(1):
            downs.add(down.group(1))
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def is_current(conn: Connection, head: str | None) -> bool:
    """Does the database stand at `head` (and only there)?"""
    if head is None:
        return False
    try:
        versions = list(conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())
    except DBAPIError:  # no table yet: a new database
        conn.rollback()
        return False
    return versions == [head]
