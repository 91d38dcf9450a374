"""Routes for the spending limits (the owner's, or an `admin` app's): `GET /api/limits` reads
them with what each account spent in the period now; `PUT /api/limits` replaces them whole
(the body is `[limits]`' spending keys as JSON: usd_per_day, usd_per_month, each_job, agents,
apps; a limit left out is no limit)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from hearth.config import SpendingLimits
from hearth.errors import Refusal
from hearth.settings import SettingsError
from hearth.web.http import spending
from hearth.web.http.deps import EngineDep

router = APIRouter()


@router.get("/api/limits")
async def read_limits(engine: EngineDep) -> dict[str, Any]:
    return spending.standing(engine)


@router.put("/api/limits")
async def replace_limits(body: SpendingLimits, request: Request,
                         engine: EngineDep) -> dict[str, Any]:
    try:
        await spending.keep(request, engine, lambda _: body, "spending_limits")
    except SettingsError as error:
        raise Refusal("settings_unusable", 409, str(error)) from error
    except OSError as error:
        raise Refusal("settings_unwritable", 503, f"settings.json could not be written "
                      f"({error.strerror}); no limit was changed.") from error
    return spending.standing(engine)
