"""A backup's database on PostgreSQL: `pg_dump`'s data, filtered, and its restore.

The dump is taken in a snapshot of our own: a REPEATABLE READ transaction exports it
(`pg_export_snapshot()`), reads in it which chats keep nothing (every mode but persistent)
and the schema's revision, and `pg_dump --snapshot` dumps exactly that moment while the
gateway goes on writing. It is the data alone (`--data-only`, plain SQL: COPY blocks and the
sequences' values), without the rows a restore makes itself (the search index its triggers
fill, the schema's revision its migrations write, which gateways run). pg_dump cannot leave
rows out, so its output is read line by line on its way to the file: a row of a COPY block
whose `session_key` (or, in `sessions`, whose `key`) names a chat that keeps nothing is
dropped, so no restricted chat's word ever reaches the disk.

The restore goes into an empty database: migrated to the backup's revision (this version's
own migrations make the schema, the privacy roles' rights and the triggers), then the data
loaded by `psql` in one transaction (the search index filled by the triggers as the messages
arrive), then migrated to this version's newest schema.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from sqlalchemy import Connection, create_engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError

from hearth.store.backup import KEPT, RUNTIME_TABLES, Snapshot, SnapshotFailed
from hearth.store.db import Database
from hearth.store.schema_check import known_revisions, migrate_to

DERIVED = ("chat_search_messages", "alembic_version")  # what a restore makes itself
BIN_GLOB = "/usr/lib/postgresql/*/bin"
DONE_MARK = "-- PostgreSQL database dump complete"
HEAD_MARK = "-- PostgreSQL database dump"
# each line a data-only plain dump writes outside its COPY blocks, whole: a comment, a session
# setting, the search path, a sequence's value, psql's \restrict (pg_dump 17.6 and later)
_SETTINGS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
             "transaction_timeout", "client_encoding", "standard_conforming_strings",
             "check_function_bodies", "xmloption", "client_min_messages", "row_security",
             "default_tablespace", "default_table_access_method", "default_with_oids")
_DATA_ONLY = re.compile(
    r"--.*"
    rf"|SET (?:{'|'.join(_SETTINGS)}) = (?:'[^';\\]*'|[A-Za-z0-9_.-]+);"
    r"|SELECT pg_catalog\.set_config\('search_path', '[^';\\]*', false\);"
    r"|SELECT pg_catalog\.setval\('[A-Za-z0-9_.\"]+', -?\d+, (?:true|false)\);"
    r"|\\(?:un)?restrict [A-Za-z0-9]+")
# pg_dump empties the search path; the search index's triggers name public's tables unqualified
EMPTY_PATH = b"SELECT pg_catalog.set_config('search_path', '', false);\n"
PUBLIC_PATH = b"SELECT pg_catalog.set_config('search_path', 'public', false);\n"
_COPY = re.compile(r'^COPY (?:"?public"?\.)?"?([A-Za-z0-9_]+)"? \((.*)\) FROM stdin;$')
_UNESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", "b": "\b", "f": "\f", "v": "\v"}


class ToolMissing(SnapshotFailed):
    """pg_dump or psql is not installed where Hearth looks for it."""


def tool(name: str) -> Path:
    """PostgreSQL's `name` (pg_dump, psql): on the PATH, else Debian's newest version."""
    found = shutil.which(name)
    if found:
        return Path(found)
    versions = sorted(Path("/").glob(f"{BIN_GLOB.lstrip('/')}/{name}"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                      else 0)
    if versions:
        return versions[-1]
    raise ToolMissing(f"PostgreSQL's {name} was not found on the PATH nor in "
                      f"{BIN_GLOB}: install PostgreSQL's client programs (Debian: "
                      "apt-get install postgresql-client) to back up or restore this database.")


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """The URL as libpq reads it, without its password, and the environment carrying it."""
    where = make_url(url)
    env = dict(os.environ)
    if where.password:
        env["PGPASSWORD"] = str(where.password)
    plain = where.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def dump_postgresql(url: str, target: Path) -> Snapshot:
    """The database at `url`, filtered, as plain SQL at `target` (see the module doc)."""
    engine = create_engine(url)
    try:
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            snapshot = str(conn.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one())
            modes = conn.exec_driver_sql("SELECT key, memory_mode FROM sessions").all()
            revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            restricted = {str(key) for key, mode in modes if mode != KEPT}
            _run_dump(url, snapshot, restricted, target)
    except SQLAlchemyError as error:
        raise SnapshotFailed("The database could not be read: "
                             f"{type(getattr(error, 'orig', None) or error).__name__}.") from error
    finally:
        engine.dispose()
    kept = tuple(sorted(str(key) for key, mode in modes if mode == KEPT))
    return Snapshot("postgresql", revision, target, kept, len(restricted))


def _run_dump(url: str, snapshot: str, restricted: set[str], target: Path) -> None:
    where, env = _libpq(url)
    command = [str(tool("pg_dump")), "--data-only", "--format=plain", "--no-owner",
               "--no-privileges", "--encoding=UTF8", f"--snapshot={snapshot}",
               *(f"--exclude-table-data=public.{name}" for name in (*DERIVED, *RUNTIME_TABLES)),
               f"--dbname={where}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as dump, open(target, "w", encoding="utf-8") as out:
        assert dump.stdout is not None and dump.stderr is not None
        lines = (line.decode("utf-8") for line in dump.stdout)
        out.writelines(kept_lines(lines, restricted))
        out.flush()
        os.fsync(out.fileno())
        said = dump.stderr.read().decode("utf-8", "replace").strip()
    if dump.returncode != 0:
        raise SnapshotFailed(f"pg_dump failed: {said.splitlines()[-1] if said else 'no reason'}")


def kept_lines(lines: Iterable[str], restricted: set[str]) -> Iterator[str]:
    """pg_dump's lines without the rows of a COPY block that name a chat in `restricted`."""
    column: int | None = None  # the index of the chat's key in the block's rows
    for line in lines:
        if column is not None:
            if line.startswith("\\."):
                column = None
            elif _unescaped(line.rstrip("\n").split("\t")[column]) in restricted:
                continue
        else:
            column = _key_column(line)
        yield line


def _key_column(line: str) -> int | None:
    """The index of the column naming a chat, if `line` begins a COPY block with one."""
    found = _COPY.match(line.rstrip("\n"))
    if found is None:
        return None
    names = [name.strip().strip('"') for name in found.group(2).split(",")]
    wanted = "key" if found.group(1) == "sessions" else "session_key"
    return names.index(wanted) if wanted in names else None


def _unescaped(field: str) -> str | None:
    """A COPY text field's value (None for NULL)."""
    if field == "\\N":
        return None
    return _UNESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), field)


def check_dump(path: Path) -> str | None:
    """What is wrong with the dump at `path` (None: nothing): it must begin as pg_dump begins,
    hold the line pg_dump ends with (a cut one lacks it), and nothing but data: outside its
    COPY blocks only what a data-only dump writes (settings, sequences' values, comments),
    never a statement that would make or change the schema (a trigger, a function, a view)."""
    try:
        with open(path, encoding="utf-8") as dump:
            head = dump.readline() + dump.readline()
            ended, foreign = _read_through(dump)
    except (OSError, UnicodeDecodeError) as error:
        return f"its database dump cannot be read ({error})"
    if HEAD_MARK not in head or not ended:
        return "its database dump is not a whole pg_dump (its beginning or end is missing)"
    if foreign is not None:
        return (f"its database dump holds {foreign[:60]!r}, which a dump of data alone does "
                "not (not a backup Hearth made: the restore would run it)")
    return None


def _read_through(dump: Iterable[str]) -> tuple[bool, str | None]:
    """Whether the dump holds pg_dump's last line, and its first line outside a COPY block
    that a data-only dump does not write (None: none)."""
    ended, in_copy = False, False
    foreign: str | None = None
    for line in dump:
        bare = line.rstrip("\n")
        if in_copy:
            in_copy = bare != "\\."
        elif bare == DONE_MARK:
            ended = True
        elif _COPY.match(bare):
            in_copy = True
        elif foreign is None and bare.strip() and not _DATA_ONLY.fullmatch(bare):
            foreign = bare
    return ended, foreign


def restore_postgresql(url: str, dump: Path, revision: str | None) -> None:
    """Load `dump` into the empty database at `url` (see the module doc); SnapshotFailed
    with the sentence when the database is not empty or the load fails."""
    _migrate_to(url, revision)
    where, env = _libpq(url)
    with subprocess.Popen([str(tool("psql")), "--no-psqlrc", "--quiet", "-v", "ON_ERROR_STOP=1",
                           "--single-transaction", "-f", "-", f"--dbname={where}"],
                          env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE) as load, open(dump, "rb") as source:
        assert load.stdin is not None and load.stderr is not None
        try:
            for line in source:  # the triggers run as the load goes: they name public's
                load.stdin.write(PUBLIC_PATH if line == EMPTY_PATH else line)
            load.stdin.close()
        except BrokenPipeError:
            pass  # psql stopped at an error: it says which below
        said = load.stderr.read().decode("utf-8", "replace").strip().splitlines()
    if load.returncode != 0:
        errors = [line for line in said if line.startswith(("psql:", "ERROR"))] or said
        raise SnapshotFailed("psql could not load the backup: "
                             f"{errors[0] if errors else 'no reason'}")
    store = Database(url)
    try:
        store.upgrade()
    finally:
        store.close()


def _migrate_to(url: str, revision: str | None) -> None:
    """The empty database at `url` migrated to `revision` (refused unless it is empty)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            held = _rows_held(conn)
            at = conn.execute(text("SELECT version_num FROM alembic_version")).scalar() \
                if "alembic_version" in _public_tables(conn) else None
    finally:
        engine.dispose()
    if held:
        raise SnapshotFailed(f"The database to restore into is not empty ({held}): restore "
                             "into a new, empty database.")
    if at is not None and at != revision:
        raise SnapshotFailed(f"The database to restore into is at migration {at}, the "
                             f"backup at {revision}: restore into a new, empty database.")
    if revision not in known_revisions():
        raise SnapshotFailed(f"The backup's schema (migration {revision}) is newer than this "
                             "Hearth knows: restore it with the version that made it.")
    migrate_to(url, str(revision))


def _public_tables(conn: Connection) -> list[str]:
    return [str(name) for name in conn.execute(text(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars()]


def _rows_held(conn: Connection) -> str:
    """The tables of `conn`'s database that hold rows (empty: none)."""
    held = []
    for name in _public_tables(conn):
        if name == "alembic_version":
            continue
        if conn.execute(text(f'SELECT EXISTS (SELECT 1 FROM public."{name}")')).scalar():
            held.append(name)
    return ", ".join(sorted(held))

