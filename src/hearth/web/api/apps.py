"""Routes for apps (the owner's, or an `admin` app's): list them, make one (its token is in
this answer and nowhere else, ever; `limits` gives it spending limits, kept as
`[limits.apps.NAME]` in the dashboard's settings), revoke one (refused from its next request
on)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from hearth.config import SpendLimit
from hearth.engine.access import apps
from hearth.engine.access.apps import App
from hearth.engine.runtime import Engine
from hearth.engine.views import iso
from hearth.errors import Refusal
from hearth.settings import SettingsError
from hearth.web.http import spending
from hearth.web.http.deps import EngineDep

router = APIRouter()


class NewApp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr = Field(min_length=1, max_length=100)
    permissions: list[StrictStr] = Field(min_length=1, max_length=len(apps.PERMISSIONS))
    limits: SpendLimit | None = None  # US dollars per day and per month it may spend


def app_view(app: App, engine: Engine) -> dict[str, Any]:
    """An app as the API shows it, with its spending limits (`[limits.apps.NAME]`, or None)."""
    limit = engine.spending.limits().apps.get(app.name)
    return {"name": app.name, "permissions": list(app.permissions),
            "created_at": iso(app.created_at),
            "last_used_at": iso(app.last_used_at),
            "revoked_at": iso(app.revoked_at), "revoked": app.revoked_at is not None,
            "limits": None if limit is None or limit.empty else limit.model_dump()}


@router.get("/api/apps")
async def list_apps(engine: EngineDep) -> dict[str, Any]:
    return {"apps": [app_view(app, engine) for app in await engine.reads.apps()],
            "permissions": list(apps.PERMISSIONS)}


@router.post("/api/apps")
async def add_app(body: NewApp, request: Request, engine: EngineDep) -> JSONResponse:
    """A new app; `token` is shown in this answer only (the gateway keeps its hash)."""
    made = await engine.access.make_app(body.name, body.permissions)
    if body.limits is not None and not body.limits.empty:
        await _limit(request, engine, made.app.name, body.limits)
    return JSONResponse({"app": app_view(made.app, engine), "token": made.token}, status_code=201,
                        headers={"Cache-Control": "no-store"})


async def _limit(request: Request, engine: Engine, name: str, limit: SpendLimit) -> None:
    """Keep the new app's spending limits (the app is made: a failure is said, not undone)."""
    try:
        await spending.keep(request, engine,
                            lambda kept: kept.model_copy(
                                update={"apps": {**kept.apps, name: limit}}), "app_limits")
    except (SettingsError, OSError) as error:
        raise Refusal("limits_not_kept", 503, f"The app {name!r} was made, but its spending "
                      f"limits could not be kept ({type(error).__name__}); set them on the "
                      "Settings page before using its token.") from error


@router.delete("/api/apps/{name}")
async def revoke_app(name: str, engine: EngineDep) -> dict[str, Any]:
    return {"app": app_view(await engine.access.revoke_app(name), engine)}
