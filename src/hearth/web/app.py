"""The FastAPI app factory: the gateway's HTTP surface over one engine."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request

from hearth import __version__, allocations, masking
from hearth.channels import setup
from hearth.channels.manager import Channels
from hearth.config import Config
from hearth.engine.compose import build_engine
from hearth.engine.runtime import Engine
from hearth.home import Home
from hearth.web.api import (
    approvals as approvals_api,
    apps as apps_api,
    attachments as attachments_api,
    branching as branching_api,
    channels as channels_api,
    desk as desk_api,
    events as events_api,
    grants as grants_api,
    imports as import_api,
    jobs as jobs_api,
    limits as limits_api,
    memory as memory_api,
    metrics as metrics_api,
    model_listing as model_listing_api,
    openai as openai_api,
    prompts as prompts_api,
    runs as runs_api,
    search as search_api,
    sessions as sessions_api,
    slack as slack_api,
    usage as usage_api,
    webhook as webhook_api,
)
from hearth.web.http import errors, quotas, vitals
from hearth.web.http.auth import require_token
from hearth.web.http.headers import SecurityHeaders
from hearth.web.http.limits import BodyLimit, BodyTimeout
from hearth.web.http.starting import Starting
from hearth.web.http.static_files import RevalidatedFiles
from hearth.web.pages import (
    agent_files as agent_files_page,
    approvals as approvals_page,
    branching as branching_page,
    chat as chat_page,
    chat_manage,
    dashboard,
    desk as desk_page,
    frame as shell,
    jobs as jobs_page,
    memory as memory_page,
    search as search_page,
    settings as settings_page,
    start as start_page,
    usage as usage_page,
)

log = logging.getLogger(__name__)


# the token-protected API's modules, the busiest first (a turn's own requests)
PROTECTED_API = (sessions_api, runs_api, events_api, branching_api, approvals_api, memory_api,
                 jobs_api, usage_api, metrics_api, grants_api, prompts_api, import_api, search_api,
                 search_page, channels_api, apps_api, attachments_api, desk_api, limits_api,
                 model_listing_api)
# each dashboard page module (its signed-in routes are `pages`)
PAGES = (start_page, dashboard, chat_page, branching_page, chat_manage, approvals_page,
         agent_files_page, jobs_page, memory_page, usage_page, settings_page, desk_page,
         shell)


def create_app(home: Home, config: Config, engine: Engine | None = None) -> FastAPI:
    masking.mask_logs()  # from here on no log record shows a secret the masker knows
    engine = engine or build_engine(home, config)
    channels = Channels(engine, setup.build(engine.config))
    starting = Starting()  # the optional subsystems /healthz lists until they have started

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await engine.start()  # recovery: settled before anything is served
        starting.begin({"models": engine.warm})  # once it serves
        # the chat channels poll from one replica only: the leader (at once on SQLite)
        engine.on_leading(lambda: starting.begin({"channels": channels.start}))
        try:
            yield
        finally:
            await starting.close()  # a stop during the start ends what is still starting
            await channels.stop_receiving()  # no new message; turns may still answer
            await engine.close()
            await channels.stop()  # what is still owed is sent at the next start
            await engine.close_store()  # the writer finishes what is queued
            allocations.log_top()  # what held the memory (only under PYTHONTRACEMALLOC)

    app = FastAPI(title="Hearth", version=__version__, lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)
    app.state.engine = engine
    app.state.channels = channels
    app.state.starting = starting
    app.state.token = home.token()
    masking.know(app.state.token)
    app.state.metrics_token = engine.config.metrics.resolved_token()  # /metrics' own, if set
    masking.know(app.state.metrics_token)
    app.state.home = home  # where the Settings page keeps settings.json
    errors.install(app, shell.page)  # an error a page asked for is drawn in its frame
    app.add_middleware(BodyLimit)
    # outside BodyLimit, so its reading of the body is timed too
    app.add_middleware(BodyTimeout, seconds=engine.config.gateway.body_timeout_seconds)
    app.add_middleware(SecurityHeaders)
    app.state.quotas = quotas.AppQuotas()  # what each app used (web.quotas)
    app.add_middleware(quotas.ReleaseAtEnd)  # an app's stream counted down however it ends
    app.mount("/static", RevalidatedFiles(directory=dashboard.STATIC), name="static")
    _include_api(app, engine, channels, starting)
    _include_pages(app)
    return app


def _include_api(app: FastAPI, engine: Engine, channels: Channels, starting: Starting) -> None:
    """/healthz, the API, /v1 and the webhook, included before the pages: Starlette tries
    routes in order and most requests are API calls (a turn's are), so they are found first.
    No API path shares its first segment with a page's, so the order changes only the cost
    (a message's route is found in 20 us rather than 85)."""

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        where = engine.placement
        return {"ok": True, "version": __version__, **engine.reads.store_health(),
                "models": list(engine.choices().models),
                "breakers": _breakers(engine),
                "sandbox": {"mode": where.mode, "sandboxed": where.sandboxed,
                            "says": where.describe()},
                "channels": channels.health(), "starting": starting.names(),
                **vitals.owner_figures(request)}

    app.include_router(openai_api.router)  # the bearer token alone: no cookie
    app.include_router(webhook_api.router)  # its signature alone: no token, no cookie
    app.include_router(slack_api.router)  # Slack's signature alone
    protected = APIRouter(dependencies=[Depends(require_token)])
    for module in PROTECTED_API:
        protected.include_router(module.router)
    app.include_router(protected)


def _include_pages(app: FastAPI) -> None:
    """The dashboard: sign-in, then each page module's signed-in routes."""
    app.include_router(dashboard.public)
    for page in PAGES:
        app.include_router(page.pages)


def _breakers(engine: Engine) -> dict[str, dict[str, object]]:
    """Each model's breaker for /healthz: closed, open or half-open, since when (epoch
    seconds; None: never changed), and its failures in a row."""
    return {view.model_id: {"state": view.state, "since": view.since or None,
                            "failures": view.failures}
            for view in engine.snapshot.breakers()}
