"""Jobs as the surfaces manage them: `Jobs`, made once by the engine with its store
(`engine.jobs`), every method awaited on the store's seam. The rules are the jobs module's
(`engine.background.jobs`: what a job may be, who may change one) and the apps' quotas on them
(`engine.background.app_quotas`); the `schedule_job` tool keeps its own blocking path
(`jobs.schedule`, from its thread)."""

from __future__ import annotations

from hearth.config import AppsConfig
from hearth.engine.background import app_quotas, jobs
from hearth.privacy.principal import Principal
from hearth.store.db import Database
from hearth.store.jobs import JobRow


class Jobs:
    """List, make, pause or resume, and delete jobs; an app's scope and quotas on them."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def listing(self, session: str | None) -> list[JobRow]:
        """Every job (a chat named that is not there is refused, not answered)."""
        return await jobs.listing(self._db, session)

    async def make(self, *, prompt: str, request: dict[str, object], session: str | None,
                   route: str, principal: Principal) -> JobRow:
        """A job `principal` (or a chat of theirs that keeps things) asks for (`jobs.make`)."""
        return await jobs.make(self._db, prompt=prompt, request=request, session=session,
                               route=route, principal=principal)

    async def change(self, job_id: int, enabled: bool, session: str | None,
                     route: str) -> JobRow:
        """Pause or resume a job; a run-once job that has run cannot be resumed."""
        return await jobs.change(self._db, job_id, enabled, session, route)

    async def delete(self, job_id: int, session: str | None, route: str) -> None:
        await jobs.delete(self._db, job_id, session, route)

    async def may_change(self, session: str | None, what: str, route: str) -> str:
        """Who a change is made for ("owner" or the chat's key); a chat that keeps nothing is
        refused (audited)."""
        return await jobs.may_change(self._db, session, what, route)

    async def app_scope(self, session: str | None, job_id: int | None = None) -> None:
        """An app reaches only the jobs a chat of its own made (`jobs.app_scope`)."""
        await jobs.app_scope(self._db, session, job_id)

    async def check_new_job(self, quotas: AppsConfig, app: str,
                            request: dict[str, object]) -> None:
        """Refuse the app a new job past its `jobs_per_app` or `job_fires_per_hour`."""
        await app_quotas.check_new_job(self._db, quotas, app, request)

    async def check_resume(self, quotas: AppsConfig, app: str, job_id: int) -> None:
        """Refuse resuming the app's job past its `job_fires_per_hour`."""
        await app_quotas.check_resume(self._db, quotas, app, job_id)

    async def check_run_now(self, quotas: AppsConfig, app: str) -> None:
        """Refuse running the app's job now while its fires this hour are spent (429)."""
        await app_quotas.check_run_now(self._db, quotas, app)
