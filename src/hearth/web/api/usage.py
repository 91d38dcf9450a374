"""`GET /api/usage`: model calls, tokens and cost per UTC day, model, provider, purpose and
outcome, as JSON (the numbers the Usage page draws), added up from the per-call record. A
cost is null when none of the calls was priced. `days` and `models` are as they always were;
`providers`, `purposes` and `outcomes` were added beside them."""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hearth.engine.reads.facade import Total, today
from hearth.web.http.deps import EngineDep
from hearth.web.http.params import span_of

router = APIRouter()


@router.get("/api/usage")
async def usage(engine: EngineDep, days: Annotated[int, Query(ge=1, le=366)] = 30
                ) -> dict[str, Any]:
    span = span_of(days, date.fromisoformat(today()))
    found = await engine.reads.usage_totals(span[0])
    return {"since": span[0], "days": [_view(t, "day") for t in found.by_day],
            "models": [_view(t, "model_id") for t in found.by_model],
            "providers": [_view(t, "provider") for t in found.by_provider],
            "purposes": [_view(t, "purpose") for t in found.by_purpose],
            "outcomes": [_view(t, "outcome") for t in found.by_outcome]}


def _view(total: Total, name: str) -> dict[str, Any]:
    view = asdict(total)
    view[name] = view.pop("key")
    return view
