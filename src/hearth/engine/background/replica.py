"""This gateway among the replicas: its row and lease, the leader's lease, the dead's runs.

Every gateway joins the database's `replicas` (`store/replicas.py`) when it starts. On SQLite
there is one gateway per database: it leads at once, and what a previous process left running
is taken back at boot. On PostgreSQL several may serve the same database:

- **The lease.** A thread of its own renews this gateway's row every third of
  `[gateway] lease_seconds` (30 s), on a connection beside the writer. A gateway that could
  not renew it for two thirds of a lease, or that finds its row gone (another found it dead),
  stops writing at once (`fence`, asked by the writer before every commit) and ends, so it
  can never write beside the replica resuming its turns; its supervisor starts it again.
- **The dead's runs.** Every third of a lease, and at boot, the runs a dead replica left
  running are taken back (`engine/turn/recovery.py`'s `take_back`: once each, whoever looks
  first), and their chats' lanes woken here. A restarted gateway takes back what its own
  previous process left (same host and home) at once, without waiting for its lease to run
  out.
- **The leader.** One live replica holds the `leader` lease and runs what must run once: the
  scheduler, the sweepers, the owed chores and the chat channels (`leading`). Another takes
  it over within a lease of the leader's death.

The look for the dead and the fence's reckoning read the `Clock` the replica is given (the
system's unless a test hands it a fake one); the renewing thread waits on real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock, SystemClock
from hearth.engine.delivery.events import Bus
from hearth.engine.turn import recovery
from hearth.store import replicas
from hearth.store.db import Database
from hearth.store.replicas import Taken
from hearth.tasks import cancel_and_wait
from hearth.threads import start_daemon

log = logging.getLogger(__name__)

LEADER = "leader"
LAPSE_AT = 2 / 3  # of a lease without a renewal: stop writing (another waits a whole lease)


class Replica:
    def __init__(self, db: Database, bus: Bus, home: str, lease: float,
                 clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.db = db
        self.bus = bus
        self.id = uuid.uuid4().hex[:16]
        self.place = f"{socket.gethostname()}:{home}"[:500]
        self.lease = lease
        self.shared = db.dialect == "postgresql"  # other gateways may serve this database
        self.leading = asyncio.Event()  # set once this gateway leads (it does until it ends)
        self._renewed = self.clock.monotonic()  # when the last renewal that landed began
        self._lapsed: str | None = None
        self._on_lapse: Callable[[str], None] = log.critical
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def join(self) -> None:
        """Make this gateway's row (at boot, before anything is served), forgetting those of
        the gateways that ended before it; lead if nobody does."""
        self._loop = asyncio.get_running_loop()
        leads = await self.db.writing(self._join)
        self._renewed = self.clock.monotonic()  # the row is new: the lease runs from here
        if leads:
            self.leading.set()

    async def take_back(self, budget: int) -> Taken:
        """Take back what dead gateways left running (see `recovery.take_back`)."""
        return await recovery.take_back(self.db, self.bus, self.id, self.lease, budget)

    def _join(self, conn: Connection) -> bool:
        """This gateway's row, the rows of those that ended before it; whether it leads."""
        replicas.join(conn, self.id, self.place, os.getpid())
        if not self.shared:
            replicas.forget_others(conn, keep=self.id)
            return True
        replicas.forget_place(conn, self.place, keep=self.id)
        return replicas.hold(conn, LEADER, self.id, self.lease)

    async def alone(self) -> bool:
        """Whether no other gateway serves this database now (on SQLite: always)."""
        if not self.shared:
            return True
        try:
            return await self.db.reading(replicas.live, self.lease) in ([], [self.id])
        except SQLAlchemyError:  # unsure (the database is away): as if others served it
            return False

    def start(self, budget: Callable[[], int], dispatch: Callable[[str], None],
              on_lapse: Callable[[str], None]) -> None:
        """Renew the lease and look for the dead from now on (PostgreSQL only)."""
        if not self.shared:
            return
        self._on_lapse = on_lapse
        self.db.writer.fence = self.fence
        self._thread = start_daemon(self._renew_forever, "hearth-lease")
        self._sweeper = asyncio.create_task(self._sweep_forever(budget, dispatch),
                                            name="replicas:dead")

    def fence(self) -> str | None:
        """Why this gateway must not commit now (its lease may have run out), or None."""
        since = self.clock.monotonic() - self._renewed
        if self._lapsed is None and since > self.lease * LAPSE_AT:
            self._lapsed = (f"This gateway could not renew its lease on the database for "
                            f"{self.lease * LAPSE_AT:.0f} s, so another replica may be "
                            "resuming its turns; it stops writing and ends.")
        return self._lapsed

    def _renew_forever(self) -> None:
        while not self._stopping.wait(self.lease / 3):
            began = self.clock.monotonic()
            try:
                with self.db.beside() as conn:
                    kept = replicas.beat(conn, self.id)
                    leads = kept and replicas.hold(conn, LEADER, self.id, self.lease)
            except SQLAlchemyError as error:
                log.warning("could not renew this gateway's lease (%s)", type(error).__name__)
                kept, leads = True, self.leading.is_set()
            else:
                self._renewed = began
            if not kept:
                self._lapse("Another replica found this gateway's lease run out and took "
                            "its turns; it stops writing and ends.")
            elif self.fence() is not None:
                self._lapse(self.fence() or "")
            elif leads and not self.leading.is_set():
                self._call(self.leading.set)
            elif self.leading.is_set() and not leads:
                self._lapse("Another replica took the leader's lease from this gateway; "
                            "it ends so that nothing runs twice.")

    def _lapse(self, sentence: str) -> None:
        self._lapsed = sentence
        self._stopping.set()
        self._on_lapse(sentence)

    def _call(self, what: Callable[[], object]) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the gateway stops
                self._loop.call_soon_threadsafe(what)

    async def _sweep_forever(self, budget: Callable[[], int],
                             dispatch: Callable[[str], None]) -> None:
        while True:
            await self.clock.sleep(self.lease / 3)
            try:
                taken = await self.take_back(budget())
            except SQLAlchemyError as error:
                log.warning("could not look for dead replicas' runs (%s)",
                            type(error).__name__)
                continue
            for _run_id, key in taken.requeued:
                dispatch(key)
            if taken.requeued or taken.past_budget or taken.gone:
                log.info("took back %d run(s) from a dead replica (%d resumed, %d abandoned)",
                         len(taken.requeued) + len(taken.past_budget) + len(taken.gone),
                         len(taken.requeued), len(taken.past_budget))

    async def when_leading(self, work: Callable[[], Awaitable[None]]) -> None:
        """Do `work` once this gateway leads (at once on SQLite)."""
        await self.leading.wait()
        await work()

    async def leave(self) -> None:
        """A clean stop: no more renewals; the row and the leases go, so another replica
        leads at once instead of a lease later."""
        self._stopping.set()
        await cancel_and_wait(self._sweeper)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        if self._lapsed is None:
            with contextlib.suppress(SQLAlchemyError):
                await self.db.writing(replicas.leave, self.id)
