"""The quotas an app's token is held to on each of its requests (`[apps]` in config.toml), and
the one object that holds their state (`AppQuotas`, on the app's state, in memory):

- the open files kept for the owner (`fd_reserve`, `web.http.descriptors`): any request of an app
  while they are nearly all in use is 503 `gateway_busy`;
- turns per minute (`turns_per_minute`): a route that admits a turn (`TURN_ROUTES`) past it in
  the last 60 seconds, a sliding window per app, is 429 `rate_limited` before anything is
  admitted;
- event streams open per token (`streams_per_token`): one more is 429 `quota_exceeded`; the
  count goes down when the request ends, however it ends (`ReleaseAtEnd` runs what a request
  left to do at its end);
- its spending limits (`[limits.apps]`, `models.spending`): a route that admits a turn while
  the app, or the gateway as a whole, has reached one is 429 `spending_limit`;
- its jobs (`new_job`, `changed_job`, `run_now`, the rules in
  `engine.background.app_quotas`): one app's job changes are made one at a time, so its count
  of jobs holds under a race.

Each refusal is a `Limited` with `Retry-After` and a sentence naming the quota, its value and
the key to raise. `keep_reserve` (first) and `hold` (last) are called by
`web.http.permissions.enforce` for an app's requests alone: the owner's requests and `/healthz`
never count.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import Depends, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from hearth.engine.access.apps import App
from hearth.engine.runtime import Engine
from hearth.errors import Limited
from hearth.models.spending import Account
from hearth.web.http import descriptors

WINDOW = 60.0  # seconds a turn counts against turns_per_minute
STREAM_RETRY_SECONDS = 10
AT_END = "hearth.at_end"  # in a request's scope: what to run when the request ends
WHERE = "under [apps] in config.toml"
TURN_ROUTES = frozenset({
    ("POST", "/api/sessions/{key}/messages"), ("POST", "/api/sessions/{key}/regenerate"),
    ("POST", "/api/sessions/{key}/edit"), ("POST", "/api/sessions/{key}/rewind"),
    ("POST", "/api/sessions/{key}/variant"), ("POST", "/api/sessions/{key}/fork"),
    ("POST", "/api/runs/{run_id}/retry"), ("POST", "/v1/chat/completions"),
})
STREAM_ROUTES = frozenset({("GET", "/api/sessions/{key}/events")})


class AppQuotas:
    """What each app used: its turns in the last minute, its open streams, its jobs' lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.turns: dict[str, deque[float]] = {}
        self.streams: dict[str, int] = {}
        self._job_locks: dict[str, asyncio.Lock] = {}

    def take_turn(self, app: str, limit: int) -> None:
        """Count one turn of the app's, or refuse it past `limit` in the last minute."""
        at = self.clock()
        window = self.turns.setdefault(app, deque())
        while window and window[0] <= at - WINDOW:
            window.popleft()
        if len(window) >= limit:
            wait = max(1, math.ceil(window[len(window) - limit] + WINDOW - at))
            raise Limited("rate_limited", 429,
                          f"The app {app!r} asked for {len(window)} turns in the last minute, "
                          f"its quota (`turns_per_minute` = {limit} {WHERE}); try again in "
                          f"{wait} seconds, or ask the owner to raise `turns_per_minute`.", wait)
        window.append(at)

    def open_stream(self, app: str, limit: int) -> Callable[[], None]:
        """Count one open stream of the app's (refused past `limit`); its release, once."""
        open_now = self.streams.get(app, 0)
        if open_now >= limit:
            raise Limited("quota_exceeded", 429,
                          f"The app {app!r} has {open_now} event streams open, its quota "
                          f"(`streams_per_token` = {limit} {WHERE}); close one and try again, "
                          "or ask the owner to raise `streams_per_token`.",
                          STREAM_RETRY_SECONDS)
        self.streams[app] = open_now + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.streams[app] -= 1

        return release

    @contextlib.asynccontextmanager
    async def jobs_of(self, app: str | None) -> AsyncIterator[None]:
        """Hold the app's job changes to one at a time (nothing held for the owner)."""
        if app is None:
            yield
            return
        async with self._job_locks.setdefault(app, asyncio.Lock()):
            yield


@contextlib.asynccontextmanager
async def new_job(quotas: AppQuotas, engine: Engine, app: str | None,
                  request: dict[str, object]) -> AsyncIterator[None]:
    """While a job is made: an app's refused past `jobs_per_app` or `job_fires_per_hour`
    (`engine.background.app_quotas`), its other job changes held off; nothing for the owner."""
    async with quotas.jobs_of(app):
        if app is not None:
            await engine.jobs.check_new_job(engine.config.apps, app, request)
        yield


@contextlib.asynccontextmanager
async def changed_job(quotas: AppQuotas, engine: Engine, app: str | None, job_id: int,
                      enabled: bool) -> AsyncIterator[None]:
    """While a job is paused or resumed: an app's resume refused past `job_fires_per_hour`."""
    async with quotas.jobs_of(app):
        if app is not None and enabled:
            await engine.jobs.check_resume(engine.config.apps, app, job_id)
        yield


async def run_now(engine: Engine, app: str | None) -> None:
    """An app's job run now is refused (429) while its jobs' fires this hour are spent."""
    if app is not None:
        await engine.jobs.check_run_now(engine.config.apps, app)


def quotas_of(request: Request) -> AppQuotas:
    quotas: AppQuotas = request.app.state.quotas
    return quotas


async def _quotas(request: Request) -> AppQuotas:
    return quotas_of(request)  # async: a dependency that is not runs on a worker thread


QuotasDep = Annotated[AppQuotas, Depends(_quotas)]


async def keep_reserve(request: Request, app: App) -> None:
    """Refuse an app's request while open files are within the owner's reserve (503)."""
    reserve = request.app.state.engine.config.apps.fd_reserve
    refused = await descriptors.reserve_refusal(app.name, reserve)
    if refused is not None:
        raise refused


def hold(request: Request, app: App, route: tuple[str, str]) -> None:
    """Hold an app's request (its route as `(method, path)`) to its turns and streams."""
    config = request.app.state.engine.config.apps
    quotas = quotas_of(request)
    if route in TURN_ROUTES:
        over_limit(request.app.state.engine, app)
        quotas.take_turn(app.name, config.turns_per_minute)
    if route in STREAM_ROUTES:
        at_end(request, quotas.open_stream(app.name, config.streams_per_token))


def over_limit(engine: Engine, app: App) -> None:
    """Refuse an app's turn while it (or the gateway as a whole) has reached a spending
    limit: 429 `spending_limit`, the limit's sentence, `Retry-After` until it resets."""
    over = engine.spending.refusal(Account(app=app.name))
    if over is not None:
        raise Limited("spending_limit", 429, over.sentence, over.retry_after)


def at_end(request: Request, step: Callable[[], None]) -> None:
    """Run `step` when this request ends (its response sent, failed or cut)."""
    request.scope.setdefault(AT_END, []).append(step)


class ReleaseAtEnd:
    """Runs what a request left to run at its end (`at_end`), however the request ended: a
    stream its client closed, one the gateway's stop ended, an error, a cancellation."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            for step in scope.pop(AT_END, []):
                step()
