"""Scheduled backups: `[backup] every` backs the home up on the leader (at once on SQLite; on
PostgreSQL only once this gateway holds the leader's lease), keeping the newest `keep`; no
`every`, no backup; the next is due `every` after the newest archive, whoever made it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from sqlalchemy import delete

from hearth.backup import rotation
from hearth.backup.reading import verify
from hearth.config import BackupConfig, Config, ConfigError, load_config
from hearth.engine.background.backups import ScheduledBackups
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.store import replicas
from hearth.store.db import Database
from hearth.store.schema import leases
from hearth.tools.registry import ToolRegistry
from tests.support.backups import key_of
from tests.support.clock import FakeClock
from tests.support.store import migrated_store


def engine_on(db: Database, home: Path, backup: dict[str, object],
              clock: FakeClock | None = None) -> Engine:
    config = Config.model_validate({"backup": backup, "gateway": {"lease_seconds": 1.5}})
    (home / "workspace").mkdir(parents=True, exist_ok=True)
    return Engine(db=db, snapshot=Snapshot.first(config), tools=ToolRegistry([]),
                  workspace=home / "workspace", chats_dir=home / "sessions", clock=clock)


async def made_while(engine: Engine, seconds: float, clock: FakeClock | None = None
                     ) -> set[str]:
    """The names of the archives this engine made within `seconds` (of `clock`, advanced
    0.05 s at a time, when the engine runs on one)."""
    seen: set[str] = set()
    deadline = time.monotonic() + seconds
    passed = 0.0
    while passed < seconds if clock is not None else time.monotonic() < deadline:
        if engine.backups.last is not None:
            seen.add(engine.backups.last.path.name)
        if clock is None:
            await asyncio.sleep(0.05)
        else:
            await clock.advance_here(0.05)
            passed += 0.05
    return seen


def test_the_leader_backs_up_every_interval_keeping_the_newest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "backups"

    async def body() -> None:
        with migrated_store(tmp_path) as db:
            engine = engine_on(db, home, {"every": "1s", "keep": 2})
            await engine.start()
            try:
                seen: set[str] = set()
                deadline = time.monotonic() + 20
                while len(seen) < 3 and time.monotonic() < deadline:
                    seen |= await made_while(engine, 0.5)
            finally:
                await engine.close()
            assert len(seen) >= 3, seen
            kept = [path.name for path in rotation.archives(folder)]
            assert kept == sorted(seen)[-2:]  # the two newest, the older ones deleted
            verify(folder / kept[-1], key_of(home))

    asyncio.run(body())


def test_without_every_no_backup_is_made(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def body() -> None:
        with migrated_store(tmp_path) as db:
            clock = FakeClock()
            engine = engine_on(db, home, {"keep": 2}, clock)
            await engine.start()
            try:
                await clock.until_paused("backups:scheduled")
                assert await made_while(engine, 1.5, clock) == set()
                assert await engine.backups._wait_for(engine.config.backup) > 0
            finally:
                await engine.close()
        assert not (home / "backups").exists()

    asyncio.run(body())


def test_the_next_backup_is_due_every_after_the_newest_archive(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    backups = ScheduledBackups(tmp_path, "sqlite:///unused.db", BackupConfig)
    hour = BackupConfig(every="1h")

    async def due() -> float:
        return await backups._wait_for(hour)

    assert asyncio.run(due()) == 0  # none yet: at once
    (folder / f"hearth-backup-{rotation.stamp(time.time() - 600)}.tar.gz").write_bytes(b"")
    assert 2900 < asyncio.run(due()) <= 3000  # made ten minutes ago: fifty minutes from now


@pytest.mark.postgres
def test_on_postgresql_only_the_leader_backs_up(tmp_path: Path) -> None:
    from tests.support import postgres

    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    home = tmp_path / "home"

    async def body(db: Database) -> None:
        await db.writing(replicas.hold, "leader", "another-gateway", 3600.0)
        engine = engine_on(db, home, {"every": "1s", "keep": 3})
        await engine.start()
        try:
            assert not engine.replica.leading.is_set()
            assert await made_while(engine, 2.0) == set()  # another gateway leads
            await db.writing(lambda conn: conn.execute(delete(leases)))  # it is gone
            assert await made_while(engine, 6.0)  # this one leads now, and backs up
        finally:
            await engine.close()

    db = postgres.database()
    try:
        asyncio.run(body(db))
    finally:
        db.close()
    verify(rotation.archives(home / "backups")[-1], key_of(home))


@pytest.mark.parametrize(("every", "seconds"), [("30m", 1800), ("12h", 43200), ("1d", 86400),
                                                ("45s", 45), ("1.5h", 5400)])
def test_every_takes_durations(every: str, seconds: float) -> None:
    assert BackupConfig(every=every).every_seconds == seconds


@pytest.mark.parametrize("every", ["daily", "10", "0h", "-1d", "1w"])
def test_a_wrong_duration_stops_the_start_naming_the_key(tmp_path: Path, every: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[backup]\nevery = "{every}"\nkeep = 3\n')
    with pytest.raises(ConfigError, match="backup"):
        load_config(path, environ={})
    path.write_text('[backup]\nkeep = 0\n')
    with pytest.raises(ConfigError, match="backup.keep"):
        load_config(path, environ={})
