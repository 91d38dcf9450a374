"""Whether a SQLite database's schema is the one this Hearth's migrations make.

What a backup restores must be the gateway's own database and nothing more: a trigger planted
in it would run on the restored gateway's every write, a view or table would be read as the
gateway's. So a backup's snapshot is compared, entry by entry, with the schema the migrations
build: they are run into an empty database up to the snapshot's revision (once per revision in
a process: a second or so), and both `sqlite_master`s are read — every table, index, view and
trigger, by type and name. A view, trigger or index is what the SQL that makes it says (its
whitespace evened out); a table is what SQLite says of it (`PRAGMA table_xinfo`: each column,
its type, default and key; its foreign keys; the columns of each unique or primary key),
since the SQL a batch migration writes for a table lists its constraints in no fixed order.
A table, index, view or trigger more, one missing, or one made otherwise is a difference,
named in a sentence. SQLite's own statistics (`sqlite_stat*`, written by `ANALYZE` or `PRAGMA
optimize`) are the planner's, not the schema, and are left out, as are the indexes SQLite
makes itself for a table's keys (`sqlite_autoindex_*`: they are the table's, compared with it).
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from contextlib import closing
from functools import lru_cache
from pathlib import Path

from sqlalchemy import create_engine

from hearth.store import migrate
from hearth.store.db import MIGRATIONS

Schema = dict[tuple[str, str], str]  # (type, name) -> the SQL that makes it, evened out
_SPACE = re.compile(r"\s+")
_AROUND = re.compile(r"\s*([(),])\s*")


def known_revisions() -> set[str]:
    return {path.stem.split("_", 1)[0] for path in migrate.VERSIONS.glob("*.py")}


def migrate_to(url: str, revision: str) -> None:
    """The database at `url` migrated up to `revision` by this Hearth's migrations."""
    from alembic import command
    from alembic.config import Config as AlembicConfig

    engine = create_engine(url)
    try:
        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
    finally:
        engine.dispose()


def schema_of(conn: sqlite3.Connection) -> Schema:
    """Every table, index, view and trigger of the database (but SQLite's statistics and its
    own keys' indexes), each as what makes it."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE "
                        "'sqlite_stat%' AND name NOT LIKE 'sqlite_autoindex_%'").fetchall()
    return {(str(kind), str(name)): _table(conn, str(name)) if kind == "table" else _evened(sql)
            for kind, name, sql in rows}


def _table(conn: sqlite3.Connection, name: str) -> str:
    """A table as SQLite says it is: its columns, foreign keys and keys' columns."""
    quoted = '"' + name.replace('"', '""') + '"'
    columns = conn.execute(f"PRAGMA table_xinfo({quoted})").fetchall()
    foreign = sorted(tuple(row[2:]) for row in
                     conn.execute(f"PRAGMA foreign_key_list({quoted})"))
    keys = sorted((str(origin), bool(unique), tuple(
        column for *_, column in conn.execute(f"PRAGMA index_info(\"{index}\")")))
        for _, index, unique, origin, _partial in conn.execute(f"PRAGMA index_list({quoted})")
        if origin in ("u", "pk"))
    return repr((columns, foreign, keys))


def _evened(sql: object) -> str:
    text = _SPACE.sub(" ", str(sql or "")).strip()
    return _AROUND.sub(r"\1", text)


@lru_cache(maxsize=4)
def expected(revision: str) -> Schema:
    """The schema the migrations make at `revision`, built in an empty database."""
    with tempfile.TemporaryDirectory(prefix="hearth-schema-") as folder:
        path = Path(folder) / "expected.db"
        migrate_to(f"sqlite:///{path}", revision)
        with closing(sqlite3.connect(path)) as conn:
            return schema_of(conn)


def difference(conn: sqlite3.Connection, revision: str | None) -> str | None:
    """What in the database's schema the migrations at `revision` do not make, or make and
    it lacks (None: the same schema), as a sentence's clause."""
    if revision is None or revision not in known_revisions():
        return (f"its database is at migration {revision}, which this Hearth does not know "
                "(a newer Hearth made it: use that version)")
    want, found = expected(revision), schema_of(conn)
    added, missing = sorted(found.keys() - want.keys()), sorted(want.keys() - found.keys())
    changed = sorted(entry for entry in want.keys() & found.keys() if want[entry] != found[entry])
    if added:
        kind, name = added[0]
        return (f"its database holds a {kind} {name!r} that this Hearth's migrations do not "
                "make (not a database Hearth wrote: something was added to it)")
    if missing:
        kind, name = missing[0]
        return (f"its database lacks the {kind} {name!r} that this Hearth's migrations make "
                "(something was taken out of it)")
    if changed:
        kind, name = changed[0]
        return (f"its database's {kind} {name!r} is not the one this Hearth's migrations "
                "make (it was changed)")
    return None
