"""Scheduled backups: with `[backup] every` set, the gateway backs up its home that often and
keeps the newest `keep` archives in `[backup] to` (default `$HEARTH_HOME/backups`).

It runs on the leader only (the runtime starts it in `_lead`: at once on SQLite, on
PostgreSQL on the gateway holding the leader's lease), as the gateway's own work, never any
chat's. The next backup is due `every` after the newest archive in the folder (at once when
there is none), so a restart neither skips one nor makes one early; the settings are read at
each look, so a change applies without a restart. The backup itself (`hearth/backup/`) runs
on a thread of its own, at a lower CPU priority: nothing of it blocks the loop, and turns go
first. One that fails is logged with its sentence and
tried again after `RETRY_SECONDS` (or `every`, if sooner). Its looks read and wait on the
`Clock` it is given (the system's unless a test hands it a fake one). Logs name archives and
sizes, never what a chat said.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from hearth.backup import rotation
from hearth.backup.making import Made, lower_priority, make_backup
from hearth.backup.manifest import BackupRefused
from hearth.clock import Clock, SystemClock
from hearth.config import BackupConfig
from hearth.home import Home
from hearth.tasks import cancel_and_wait
from hearth.threads import ContextCarryingExecutor

log = logging.getLogger(__name__)

LOOK_SECONDS = 60.0  # the longest wait before the settings are read again
RETRY_SECONDS = 300.0  # after a backup that failed


class ScheduledBackups:
    def __init__(self, home_root: Path, db_url: str, settings: Callable[[], BackupConfig],
                 clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.home = Home(home_root)
        self.db_url = db_url
        self.settings = settings
        self.last: Made | None = None  # the newest this process made
        self._task: asyncio.Task[None] | None = None
        self._failed_at: float | None = None
        # a thread of their own, at a lower priority (so it is never the loop's default pool's)
        self._thread = ContextCarryingExecutor(max_workers=1, thread_name_prefix="hearth-backup",
                                               initializer=lower_priority)

    def start(self) -> None:
        """Back up on schedule from now on (call on the loop; once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="backups:scheduled")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self._thread.shutdown(wait=False)

    async def _forever(self) -> None:
        while True:
            wait = await self._wait_for(self.settings())
            if wait > 0:
                await self.clock.sleep(min(wait, LOOK_SECONDS))
                continue
            await self.back_up(self.settings())

    async def _wait_for(self, config: BackupConfig) -> float:
        """Seconds until the next backup is due (0: now)."""
        every = config.every_seconds
        if every is None:
            return LOOK_SECONDS
        folder = rotation.folder_for(self.home.root, config.to)
        newest = await asyncio.to_thread(rotation.newest_made, folder)
        due = (newest + every) if newest is not None else 0.0
        if self._failed_at is not None:
            due = max(due, self._failed_at + min(every, RETRY_SECONDS))
        return max(0.0, due - self.clock.now())

    async def back_up(self, config: BackupConfig) -> Made | None:
        """One backup now, then the oldest beyond `keep` deleted; None when it failed."""
        folder = rotation.folder_for(self.home.root, config.to)
        try:  # on its own thread (a pool that carries the context, `hearth.threads`)
            made = await asyncio.wrap_future(self._thread.submit(make_backup, self.home,
                                                                 self.db_url, folder))
            gone = await asyncio.to_thread(rotation.rotate, folder, config.keep)
        except (BackupRefused, OSError) as error:
            self._failed_at = self.clock.now()
            log.warning("the scheduled backup failed: %s", error)
            return None
        self._failed_at = None
        self.last = made
        log.info("backed up to %s (%.1f MB, %.1f s); %d older archive(s) removed",
                 made.path.name, made.size / 1e6, made.seconds, len(gone))
        return made
