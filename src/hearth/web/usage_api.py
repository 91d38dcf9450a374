"""`GET /api/usage`: model calls, tokens and cost per UTC day and per model, as JSON (the
numbers the Usage page draws). A cost is null when none of the calls was priced."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hearth.engine import usage as usage_totals
from hearth.engine.usage import Total
from hearth.web.deps import EngineDep
from hearth.web.usage_page import span_of

router = APIRouter()


@router.get("/api/usage")
async def usage(engine: EngineDep, days: Annotated[int, Query(ge=1, le=366)] = 30
                ) -> dict[str, Any]:
    span = span_of(days, date.fromisoformat(usage_totals.today()))
    by_day, by_model = await asyncio.to_thread(usage_totals.totals, engine.db, span[0])
    return {"since": span[0], "days": [_view(t, "day") for t in by_day],
            "models": [_view(t, "model_id") for t in by_model]}


def _view(total: Total, name: str) -> dict[str, Any]:
    view = asdict(total)
    view[name] = view.pop("key")
    return view
