"""A job's fire held to the spending limits (`models.spending`): a due fire whose job, whose
app or the gateway as a whole has reached a spending limit is skipped before anything is
admitted, and the job's chat is told which limit, what was spent and when it resets (audited
`job.skipped` with the reason SPENDING). The turn a fire starts is held to the same limits
call by call; this check spares the chat a message no model would answer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hearth.engine.background import app_quotas, jobs
from hearth.engine.delivery.events import Bus
from hearth.models.spending import Account, Spending
from hearth.store.db import Database
from hearth.store.jobs import JobRow

SPENDING = "spending_limit"  # why a skipped fire was skipped (the audit's reason)


@runtime_checkable
class SpendingHost(Protocol):
    """What a fire's check needs of the engine (the scheduler's host)."""

    db: Database
    bus: Bus
    spending: Spending


async def fire_over_limit(host: object, job: JobRow) -> bool:
    """Whether this due fire is over a spending limit; if so its chat is told, and the
    scheduler skips it."""
    if not isinstance(host, SpendingHost):
        return False
    if host.spending.limits().none:
        return False
    app = await app_quotas.app_of(host.db, job)
    over = host.spending.refusal(Account(app=app, job=job.id))
    if over is None:
        return False
    when = jobs.clock(job.next_at, zone=job.timezone)
    await app_quotas.tell(host, job, f"Job #{job.id} did not run at {when}: {over.sentence}",
                          SPENDING)
    return True
