"""What `/metrics` and `/api/status` show beside the counts, read when they are asked for
(never kept up to date on the hot path): turns running here, the queue of admitted runs, the
delivery ledger by state, the owed chores, each model's breaker."""

from __future__ import annotations

from dataclasses import dataclass

from hearth import __version__
from hearth.models.breakers import BreakerView
from hearth.store.db import Database
from hearth.store.tallies import Tallies, tallies


@dataclass(frozen=True)
class Figures:
    version: str
    db_engine: str  # sqlite | postgresql
    running: int  # turns running in this process
    tallies: Tallies  # queued runs per chat (counts alone), deliveries, owed chores
    breakers: list[BreakerView]

    @property
    def queued(self) -> int:
        """Admitted runs waiting, in every chat."""
        return sum(self.tallies.queues)

    @property
    def deepest(self) -> int:
        """The most runs waiting in one chat (0: none waits)."""
        return self.tallies.queues[0] if self.tallies.queues else 0


async def gather(db: Database, running: int, breakers: list[BreakerView]) -> Figures:
    """The figures now: the store's counts read in one transaction."""
    counted = await db.reading(tallies)
    return Figures(__version__, db.dialect, running, counted, breakers)
