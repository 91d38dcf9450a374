"""`GET /api/usage`: model calls, tokens and cost per UTC day and per model, as JSON (the
numbers the Usage page draws). A cost is null when none of the calls was priced."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hearth.store import usage as usage_store
from hearth.store.db import now
from hearth.web.deps import EngineDep
from hearth.web.usage_page import read_totals, span_of

router = APIRouter()


@router.get("/api/usage")
async def usage(engine: EngineDep, days: Annotated[int, Query(ge=1, le=366)] = 30
                ) -> dict[str, Any]:
    span = span_of(days, date.fromisoformat(usage_store.day_of(now())))
    by_day, by_model = await asyncio.to_thread(read_totals, engine.db, span[0])
    return {"since": span[0], "days": [_view(t, "day") for t in by_day],
            "models": [_view(t, "model_id") for t in by_model]}


def _view(total: usage_store.Total, name: str) -> dict[str, Any]:
    view = asdict(total)
    view[name] = view.pop("key")
    return view
