"""The one composition root: builds the engine (the store opened and migrated, the model
registry, memory, the tools) for the gateway, the CLI and the tests."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from hearth import masking, settings
from hearth.backup import keys, rotation
from hearth.backup.making import Made, lower_priority, make_backup
from hearth.backup.manifest import BackupRefused as BackupRefused  # the CLI names it from here
from hearth.backup.reading import Verified, verify
from hearth.backup.restoring import Restored, restore
from hearth.clock import Clock
from hearth.config import Config, WebSearchConfig
from hearth.engine.access import signin_links
from hearth.engine.background.job_tool import job_tools
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn import agents
from hearth.engine.turn.attachment_tool import OpenAttachment
from hearth.home import Home
from hearth.memory.service import Memory
from hearth.memory.tools import memory_tools
from hearth.models import guard, setup
from hearth.models.calls import CallRecorder
from hearth.store.check import Finding, check
from hearth.store.copy import (
    CopyRefused as CopyRefused,  # the CLI names it from here
    Counted,
    Progress,
    copy,
)
from hearth.store.db import Database, now
from hearth.store.upgrade import (
    MigrationFailed as MigrationFailed,  # the CLI's to catch
    upgrade_apart,
)
from hearth.tools.base import Tool
from hearth.tools.registry import ToolRegistry, builtin_tools
from hearth.tools.web_search import WebSearch

log = logging.getLogger(__name__)
EXIT_STORE_FAILED = 75  # EX_TEMPFAIL: the store failed under the gateway; a restart recovers


def open_store(url: str, synchronous: str = "FULL") -> Database:
    """The store at `url`, migrated to the current schema."""
    db = Database(url, synchronous=synchronous)
    db.upgrade()
    return db


def upgrade_store(home: Home, config: Config) -> str:
    """Apply the migrations to the home's store and close it (`hearth db upgrade`); its URL."""
    home.ensure()
    open_store(home.database_url(), config.store.synchronous).close()
    return home.database_url()


def make_signin_link(home: Home, at: float | None = None) -> str:
    """A new one-time sign-in link's code, kept (hashed) in the home's store, which is
    migrated first if it must be (`hearth token --link`); made at `at` (default: now)."""
    home.ensure()
    db = open_store(home.database_url())
    try:
        with db.write() as conn:
            return signin_links.make(conn, now() if at is None else at)
    finally:
        db.close()


def check_store(home: Home) -> list[Finding]:
    """What `hearth db check` reports of the home's database (nothing is changed)."""
    return check(home.database_url())


def copy_store(home: Home, to_url: str, progress: Progress | None = None) -> list[Counted]:
    """Copy the home's database into the empty one at `to_url` (`hearth db copy`); each
    table's counts on both sides. Raises CopyRefused."""
    source, target = Database(home.database_url()), Database(to_url)
    try:
        return copy(source, target, progress)
    finally:
        source.close()
        target.close()


def back_up(home: Home, config: Config, to: Path | None = None) -> Made:
    """Back up the home while the gateway serves (`hearth backup`) into `to`, else
    `[backup] to`, else `<home>/backups`, at a lower CPU priority. Raises BackupRefused."""
    folder = rotation.folder_for(home.root, to if to is not None else config.backup.to)
    lower_priority()
    return make_backup(home, home.database_url(), folder)


def verify_backup(archive: Path, key_file: Path | None = None) -> Verified:
    """Check an archive whole (`hearth backup --verify`), signed with the backup key at
    `key_file`, else this home's. Raises BackupRefused."""
    return verify(archive, _backup_key(key_file))


def restore_backup(archive: Path, into: Path, key_file: Path | None = None) -> Restored:
    """Restore an archive signed with the backup key at `key_file` (else this home's) into
    the new home `into` (`hearth restore`); a PostgreSQL backup into the database
    HEARTH_DATABASE_URL names. Raises BackupRefused."""
    return restore(archive, into, os.environ.get("HEARTH_DATABASE_URL"),
                   _backup_key(key_file))


def _backup_key(key_file: Path | None) -> keys.KeyFile:
    return keys.read(key_file if key_file is not None else
                     keys.key_path(Home.from_env().root))


def upgrade_store_apart(home: Home, verbose: bool = False) -> None:
    """Bring the home's store to the current schema in a child process (`store/upgrade.py`):
    the gateway's way, so it never holds Alembic. Raises MigrationFailed."""
    home.ensure()
    upgrade_apart(home.database_url(), verbose)


def standard_tools(db: Database, memory: Memory, search: WebSearchConfig | None = None
                   ) -> list[Tool]:
    """The built-in tools, memory's, the jobs tool, the attachments' reader, and web_search
    when `[web_search]` names a provider."""
    searching: list[Tool] = [] if search is None else [
        WebSearch(search, lambda provider, usd: guard.charge(provider, "web_search", usd),
                  guard.over_limit)]
    return [*builtin_tools(), *memory_tools(memory, db), *job_tools(db), OpenAttachment(db),
            *searching]


def build_engine(home: Home, config: Config, clock: Clock | None = None) -> Engine:
    """Open the store (migrated), find the models, and compose the gateway's engine (its
    timed loops on `clock`: the system's unless a test hands it a fake one)."""
    home.ensure()
    config = agents.with_folder_profiles(config, home.agents_dir)  # agents/<name>/agent.toml
    base = config
    config = settings.apply(config, home.root)  # what the dashboard's Settings page kept
    masking.know(*(value for server in config.mcp_servers for name, value in server.env.items()
                   if masking.looks_secret(name)))
    db = open_store(home.database_url(), config.store.synchronous)
    db.writer.on_death = _end_gateway
    for problem in setup.problems(config):
        log.warning("%s", problem)
    snapshot = Snapshot.first(config)
    if not snapshot.models.ids():
        log.warning("no model is set up; every turn will end saying how to add one")
    memory = Memory(db, home.memory_dir)
    tools = ToolRegistry(standard_tools(db, memory, config.web_search))
    engine = Engine(db=db, snapshot=snapshot, tools=tools, memory=memory,
                    workspace=home.workspace, hidden_from_tools=(home.root,),
                    chats_dir=home.sessions_dir, base_config=base,
                    agents_dir=home.agents_dir, clock=clock)
    return recording(engine)


def _end_gateway(sentence: str) -> None:
    """The one writer could not commit: nothing later can be trusted to reach the disk, so
    the process ends here, saying why. What was acknowledged is on disk already; the callers
    of the failed transaction were never answered, and a restart recovers as after a crash."""
    sys.stderr.write(f"hearth: {sentence}\n")
    sys.stderr.flush()
    os._exit(EXIT_STORE_FAILED)


def private_engine(folder: Path, config: Config, tools: Iterable[Tool] | None = None,
                   clock: Clock | None = None) -> Engine:
    """An engine on a private store in `folder` (hearth.db, workspace/), for the tests: the
    standard tools unless `tools` is given, the system's clock unless `clock` is."""
    db = open_store(f"sqlite:///{folder / 'hearth.db'}")
    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)
    memory = Memory(db, workspace / "memory")
    registry = ToolRegistry(standard_tools(db, memory, config.web_search) if tools is None
                            else tools)
    return recording(Engine(db=db, snapshot=Snapshot.first(config),
                            tools=registry, workspace=workspace, memory=memory,
                            clock=clock))


def recording(engine: Engine) -> Engine:
    """Have every model call recorded in `engine`'s store, priced by the model entries of
    the settings snapshot its next turn runs from, and held to its spending limits (the one
    engine of a process: the last one composed is the one recorded to)."""
    guard.install(CallRecorder(engine.db,
                               lambda model_id: engine.snapshot.models.config_of(model_id),
                               engine.observer.call_ended))  # counted, and traced in a turn
    guard.install_spending(engine.spending)
    return engine
