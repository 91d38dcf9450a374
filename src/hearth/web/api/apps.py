"""Routes for apps (the owner's, or an `admin` app's): list them, make one (its token is in
this answer and nowhere else, ever), revoke one (refused from its next request on)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from hearth.engine.access import apps
from hearth.engine.access.apps import App
from hearth.engine.views import iso
from hearth.web.http.deps import EngineDep

router = APIRouter()


class NewApp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr = Field(min_length=1, max_length=100)
    permissions: list[StrictStr] = Field(min_length=1, max_length=len(apps.PERMISSIONS))


def app_view(app: App) -> dict[str, Any]:
    return {"name": app.name, "permissions": list(app.permissions),
            "created_at": iso(app.created_at),
            "last_used_at": iso(app.last_used_at),
            "revoked_at": iso(app.revoked_at), "revoked": app.revoked_at is not None}


@router.get("/api/apps")
async def list_apps(engine: EngineDep) -> dict[str, Any]:
    return {"apps": [app_view(app) for app in await engine.reads.apps()],
            "permissions": list(apps.PERMISSIONS)}


@router.post("/api/apps")
async def add_app(body: NewApp, engine: EngineDep) -> JSONResponse:
    """A new app; `token` is shown in this answer only (the gateway keeps its hash)."""
    made = await engine.access.make_app(body.name, body.permissions)
    return JSONResponse({"app": app_view(made.app), "token": made.token}, status_code=201,
                        headers={"Cache-Control": "no-store"})


@router.delete("/api/apps/{name}")
async def revoke_app(name: str, engine: EngineDep) -> dict[str, Any]:
    return {"app": app_view(await engine.access.revoke_app(name))}
