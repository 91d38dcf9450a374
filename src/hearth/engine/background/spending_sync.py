"""The spending tally among several gateways: with others serving the same database, what they
spent is read from the per-call record every third of a lease and merged into this gateway's
tally (`Spending.merge`), so a limit holds across the replicas within seconds, not only per
gateway. On SQLite (one gateway) nothing runs. Its pauses wait on the `Clock` it is given."""

from __future__ import annotations

import logging
import time

from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock
from hearth.models import spending
from hearth.models.spending import Spending
from hearth.store import model_calls
from hearth.store.db import Database

log = logging.getLogger(__name__)


async def merge_once(db: Database, tally: Spending) -> None:
    """Merge what the record holds for this month into the tally."""
    month = spending.period_start("month", time.time())
    tally.merge(await db.reading(model_calls.spent_since, f"{month}-01"))


async def merge_forever(db: Database, tally: Spending, every: float, clock: Clock) -> None:
    """`merge_once` every `every` seconds of `clock`; a database away is tried again the
    next time."""
    while True:
        await clock.sleep(every)
        try:
            await merge_once(db, tally)
        except SQLAlchemyError as error:
            log.warning("could not read the other gateways' spending (%s)",
                        type(error).__name__)
