"""The quotas an app's jobs are held to (`[apps]` in config.toml): how many jobs its chats may
hold (`jobs_per_app`) and how often its jobs may fire (`job_fires_per_hour`).

An app's jobs are those made on its behalf (their principal) or by a chat it started
(`store/app_usage.py` counts them). Making one,
or resuming one, is refused when the app already holds `jobs_per_app` jobs (a one-shot that
ran is done and not counted) or when the schedules of its running jobs, this one among them,
could fire more than `job_fires_per_hour` times in one hour (a job's busiest hour: 60 / its
interval for every N minutes, the minutes its cron names, 1 for a one-shot). What fires is
held too, whatever made the job: running an app's job now is refused (429, `Retry-After`)
while its jobs fired that often in the last hour, and the scheduler skips a due fire over it
(`fire_refused`), saying so in the job's chat. The owner's requests never count against
these: the web layer asks only for an app's.
"""

from __future__ import annotations

import math
import time
from typing import Protocol, runtime_checkable

from hearth.config import AppsConfig, Config
from hearth.engine.background import jobs
from hearth.engine.delivery.events import Bus, message_frame
from hearth.errors import Limited, Refusal
from hearth.privacy import principal as principals
from hearth.sessions import chats
from hearth.store import app_usage, transcript
from hearth.store.db import Database
from hearth.store.jobs import JobRow

HOUR = 3600.0
FIRES_SPENT = "app_fires_spent"  # why a skipped fire was skipped (the audit's reason)
WHERE = "under [apps] in config.toml"


class ChatHost(Protocol):
    """What telling a job's chat needs of the engine."""

    db: Database
    bus: Bus


@runtime_checkable
class QuotaHost(Protocol):
    """What a fire's check needs of the engine (the scheduler's host)."""

    db: Database
    config: Config
    bus: Bus


def peak_per_hour(every_seconds: int | None, cron: str | None) -> int:
    """The most times a schedule fires in one hour."""
    if cron is not None:
        from croniter import croniter  # at an app's first cron job, not every start

        minutes = croniter(cron).expanded[0]
        return 60 if "*" in minutes else len(minutes)
    if every_seconds is not None:
        return math.ceil(HOUR / every_seconds)
    return 1


def _done(job: JobRow) -> bool:
    """A one-shot that ran: it never fires again, nor can it be resumed."""
    return job.once and job.last_fired_at is not None


def _load(held: list[JobRow]) -> int:
    """The busiest hour of these jobs' schedules, the running ones'."""
    return sum(peak_per_hour(job.every_seconds, job.cron)
               for job in held if job.enabled and not _done(job))


async def check_new_job(db: Database, quotas: AppsConfig, app: str,
                        request: dict[str, object]) -> None:
    """Refuse the app a new job past its count or its fires per hour (a schedule that is not
    valid is left to `jobs.make` to refuse)."""
    held = [job for job in await db.reading(app_usage.jobs_of, app, _of(app)) if not _done(job)]
    if len(held) >= quotas.jobs_per_app:
        raise Refusal("quota_exceeded", 429,
                      f"The app {app!r} has {len(held)} jobs, its quota (`jobs_per_app` = "
                      f"{quotas.jobs_per_app} {WHERE}); delete one of its jobs first, or ask "
                      "the owner to raise `jobs_per_app`. No job was made.")
    try:
        planned = jobs.plan_of(request, time.time())
    except jobs.BadSchedule:
        return
    _check_load(app, quotas, _load(held) + peak_per_hour(planned.every_seconds, planned.cron),
                "No job was made.")


async def check_resume(db: Database, quotas: AppsConfig, app: str, job_id: int) -> None:
    """Refuse resuming one of the app's jobs whose schedule would take its jobs past their
    fires per hour (a job not the app's, running or done is left as it is)."""
    held = await db.reading(app_usage.jobs_of, app, _of(app))
    job = next((each for each in held if each.id == job_id), None)
    if job is None or job.enabled or _done(job):
        return
    _check_load(app, quotas, _load(held) + peak_per_hour(job.every_seconds, job.cron),
                f"Job #{job_id} was not resumed.")


def _check_load(app: str, quotas: AppsConfig, load: int, outcome: str) -> None:
    if load > quotas.job_fires_per_hour:
        raise Refusal("quota_exceeded", 429,
                      f"This schedule would let the app {app!r}'s jobs fire up to {load} times "
                      f"an hour, over its quota (`job_fires_per_hour` = "
                      f"{quotas.job_fires_per_hour} {WHERE}); choose a slower schedule, pause "
                      "or delete another of its jobs, or ask the owner to raise "
                      f"`job_fires_per_hour`. {outcome}")


async def check_run_now(db: Database, quotas: AppsConfig, app: str) -> None:
    """Refuse the app running a job now while its jobs fired their hour's quota (429, with the
    seconds until the oldest of them is an hour old)."""
    at = time.time()
    fires = await db.reading(app_usage.fires_since, app, _of(app), at - HOUR)
    budget = quotas.job_fires_per_hour
    if len(fires) < budget:
        return
    wait = math.ceil(fires[len(fires) - budget] + HOUR - at)
    raise Limited("rate_limited", 429,
                  f"The app {app!r}'s jobs fired {len(fires)} times in the last hour, its "
                  f"quota (`job_fires_per_hour` = {budget} {WHERE}); try again in {wait} "
                  "seconds, or ask the owner to raise `job_fires_per_hour`.", wait)


async def fire_refused(host: object, job: JobRow) -> bool:
    """Whether this due fire of an app's job is over the app's fires per hour; if so the job's
    chat is told, and the scheduler skips the fire (audited with the reason FIRES_SPENT)."""
    if not isinstance(host, QuotaHost):
        return False
    app = await app_of(host.db, job)
    if app is None:
        return False
    budget = host.config.apps.job_fires_per_hour
    fired = await host.db.reading(app_usage.fires_since, app, _of(app), time.time() - HOUR)
    if len(fired) < budget:
        return False
    when = jobs.clock(job.next_at, zone=job.timezone)
    await tell(host, job, f"Job #{job.id} did not run at {when}: the app {app!r}'s jobs fired "
                f"{len(fired)} times in the last hour, its quota (`job_fires_per_hour` = "
                f"{budget} {WHERE}). It runs again at its next time; the owner can raise the "
                "quota.")
    return True


async def app_of(db: Database, job: JobRow) -> str | None:
    """The app a job is for: its principal's, else the app whose chat made it (None: the
    owner's job)."""
    app = principals.decode(job.principal).app
    if app is not None or job.made_by == app_usage.OWNER:
        return app
    found: str | None = await db.reading(app_usage.app_of_chat, job.made_by)
    return found


def _of(app: str) -> str:
    """The app's principal as stored."""
    return principals.app(app).encode()


async def tell(host: ChatHost, job: JobRow, sentence: str, why: str = FIRES_SPENT) -> None:
    """A notice in the job's chat (made if it is not there yet), shown live, saying why a
    fire was skipped (`why`, the audit's reason); none when its name is held by a chat of
    another mode (the scheduler skips the fire all the same)."""
    try:
        await chats.open_chat(host.db, name=job.session_key, memory_mode="persistent",
                              origin="job",
                              created_by_app=principals.decode(job.principal).app)
    except chats.ChatError:
        return
    event = await host.db.writing(transcript.append, job.session_key, "notice",
                                  {"text": sentence}, meta={"job": job.id, "quota": why},
                                  durable=False)
    host.bus.publish(job.session_key, message_frame(event))
