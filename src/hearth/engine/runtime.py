"""The engine: composes the store, the live bus, the lanes, models and tools.

It owns the gateway's turn machinery for one process: `start` settles what a previous process
left and re-queues admitted runs in order; `send` admits a message and wakes its lane;
`close` stops taking runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hearth.config import Config
from hearth.engine import admission, endings
from hearth.engine.admission import Admitted
from hearth.engine.events import Bus
from hearth.engine.turn import TurnDeps, run_turn
from hearth.models.registry import ModelRegistry
from hearth.sessions.lanes import Lanes
from hearth.store import runs as run_store
from hearth.store import sessions as session_store
from hearth.store.db import Database
from hearth.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class Engine:
    def __init__(
        self,
        *,
        db: Database,
        config: Config,
        models: ModelRegistry,
        tools: ToolRegistry,
        workspace: Path,
    ) -> None:
        self.db = db
        self.config = config
        self.bus = Bus()
        self.deps = TurnDeps(db=db, bus=self.bus, config=config, models=models, tools=tools,
                             default_workspace=workspace)
        self.lanes: Lanes | None = None

    async def start(self) -> None:
        """Settle runs a previous process left running, then re-queue admitted ones in order."""
        self.lanes = Lanes(self.config.gateway.max_concurrent_turns, self._run_next)
        with self.db.write() as conn:
            session_store.release_all_writers(conn)
            left_running = run_store.with_status(conn, "running")
        for run in left_running:
            endings.settle(self.db, self.bus, session_key=run.session_key, run_id=run.run_id,
                           ending=endings.interrupted())
        with self.db.read() as conn:
            waiting = run_store.sessions_with_admitted(conn)
        for session_key in waiting:
            self.lanes.dispatch(session_key)
        if left_running or waiting:
            log.info("boot: %d interrupted run(s) settled, %d chat(s) with queued messages",
                     len(left_running), len(waiting))

    def send(
        self, session_key: str, text: str, *, client_message_id: str | None = None,
        source_channel: str | None = None,
    ) -> Admitted:
        admitted = admission.admit(self.db, self.bus, session_key, text,
                                   client_message_id=client_message_id,
                                   source_channel=source_channel)
        if self.lanes is not None:
            self.lanes.dispatch(session_key)
        return admitted

    async def _run_next(self, session_key: str) -> bool:
        with self.db.read() as conn:
            run = run_store.next_admitted(conn, session_key)
        if run is None:
            return False
        await run_turn(self.deps, run)
        return True

    async def close(self) -> None:
        if self.lanes is not None:
            await self.lanes.close()
