"""A throwaway PostgreSQL cluster for the tests: `database()` gives a new, migrated database
(a copy of a template database migrated once by Alembic), each on this process's own cluster.

No PostgreSQL runs on the machines the tests run on: each test process starts one, `initdb`
into a temporary folder and `pg_ctl start` on a free port, the first time a test asks for a
database, and stops it when the process exits. As root, the cluster runs as the `postgres`
user (PostgreSQL refuses to run as root). Where no PostgreSQL binaries are found (Debian:
`apt-get install postgresql`) or psycopg is not installed, `unavailable()` says why and the
tests that need it skip with that sentence.

The cluster trades durability for speed (fsync and synchronous_commit off): the crash tests
that run on it kill the gateway, never the server, so what the gateway committed stays
committed; a power cut is SQLite's tests' to hold."""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from hearth.store.db import Database

INSTALL = ("install PostgreSQL (Debian: apt-get install postgresql) and psycopg "
           "(pip install -e '.[dev]')")
_cluster: list[Cluster] = []
_names = itertools.count(1)


def binaries() -> Path | None:
    """The folder of `initdb` and `pg_ctl`: on the PATH, else Debian's newest version."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=_version)
    return versions[-1].parent if versions else None


def _version(initdb: Path) -> int:
    name = initdb.parent.parent.name
    return int(name) if name.isdigit() else 0


def unavailable() -> str | None:
    """Why no PostgreSQL test can run here, or None when they can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return f"psycopg is not installed: {INSTALL}"
    if binaries() is None:
        return f"no PostgreSQL binaries were found: {INSTALL}"
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: its own user runs it
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return f"running as root with no postgres user to run the cluster: {INSTALL}"
        if shutil.which("runuser") is None:
            return "running as root without runuser, so no PostgreSQL cluster can be started"
    return None


class Cluster:
    """One PostgreSQL server in a temporary folder, on a free port, stopped at exit."""

    def __init__(self) -> None:
        self.bin = binaries()
        assert self.bin is not None, INSTALL
        self.root = Path(tempfile.mkdtemp(prefix="hearth-pg-"))
        self.root.chmod(0o777)  # the postgres user writes its data here when we are root
        self.port = _free_port()
        self._run("initdb", "-D", str(self.root / "data"), "-U", "hearth", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        settings = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-w",
                  "-o", settings, "start")
        atexit.register(self.stop)
        self._make_template()

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://hearth@127.0.0.1:{self.port}/{name}"

    def create(self, name: str, template: str | None = "hearth_template") -> str:
        """A new database (a copy of `template`); its URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=hearth dbname=postgres",
                             autocommit=True) as conn:
            copy = f" TEMPLATE {template}" if template else ""
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)

    def _make_template(self) -> None:
        store = Database(self.create("hearth_template", template=None))
        try:
            store.upgrade()
        finally:
            store.close()

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "stop",
                  check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        assert self.bin is not None
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=check, capture_output=True, text=True, timeout=60)


def cluster() -> Cluster:
    """This process's cluster, started on first use."""
    if not _cluster:
        _cluster.append(Cluster())
    return _cluster[0]


def database(template: bool = True) -> Database:
    """A new database on this process's cluster, migrated to the newest schema (a copy of
    the template, or with `template=False` migrated from nothing by Alembic)."""
    where = cluster()
    name = f"t{os.getpid()}_{next(_names)}"
    store = Database(where.create(name, "hearth_template" if template else None))
    store.upgrade()
    return store


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
