"""The gateway's own figures: `GET /metrics` in the Prometheus text format (for a scraper:
the gateway's token, or the metrics token of `[metrics] token_env`), and `GET /api/status`,
the same at a glance as JSON (the owner's; what `hearth status` prints). Both come from
`engine.vitals`; neither names a chat, a title or a word of one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from hearth.web.http.deps import EngineDep

router = APIRouter()
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the exposition format's type


@router.get("/metrics")
async def metrics(engine: EngineDep) -> Response:
    return Response(await engine.vitals.metrics(), media_type=PROMETHEUS_TEXT,
                    headers={"Cache-Control": "no-store"})


@router.get("/api/status")
async def status(engine: EngineDep) -> dict[str, Any]:
    return await engine.vitals.status()
