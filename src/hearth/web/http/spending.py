"""The spending limits as the Settings and Usage pages and `/api/limits` show them: each limit
set with what its account spent in the period now and when it resets, and the models no limit
holds (they have no price). Saving limits (`keep`) writes them whole into the dashboard's
settings (`hearth.settings`), the next call holds to them, and the change is audited by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request

from hearth import settings
from hearth.config import SpendingLimits
from hearth.engine.runtime import Engine
from hearth.engine.views import iso
from hearth.models.spending import Spent, usd


def unpriced(engine: Engine) -> list[str]:
    """The models no spending limit holds: those without both prices."""
    return [m.id for m in engine.config.models
            if m.price_in_per_mtok is None or m.price_out_per_mtok is None]


def row(spent: Spent) -> dict[str, Any]:
    """One limit and its standing, as JSON and for the pages."""
    cap = spent.cap
    return {"kind": cap.kind, "name": cap.name or None, "period": cap.period,
            "usd": cap.usd, "spent_usd": round(spent.spent, 6),
            "left_usd": round(max(0.0, cap.usd - spent.spent), 6),
            "reached": spent.spent >= cap.usd, "resets_at": iso(spent.resets_at),
            "label": cap.label(), "short": _short(spent), "spent_words": usd(spent.spent),
            "usd_words": usd(cap.usd),
            "percent": 100 if cap.usd <= 0 else min(100, round(100 * spent.spent / cap.usd))}


def _short(spent: Spent) -> str:
    """'Agent coder · today', 'Everything · this month'."""
    cap = spent.cap
    who = {"all": "Everything", "agent": f"Agent {cap.name}", "app": f"App {cap.name}",
           "job": f"Job #{cap.name}"}[cap.kind]
    return f"{who} · {'today' if cap.period == 'day' else 'this month'}"


def standing(engine: Engine) -> dict[str, Any]:
    """The limits, each one's standing, and the models they do not hold."""
    return {"limits": engine.spending.limits().model_dump(),
            "standing": [row(each) for each in engine.spending.standing()],
            "unpriced": unpriced(engine)}


async def keep(request: Request, engine: Engine,
               change: Callable[[SpendingLimits], SpendingLimits], what: str) -> None:
    """Save the limits `change` makes of the ones in force (SettingsError, OSError: not
    saved); the next model call holds to them."""
    path = settings.path_in(request.app.state.home.root)
    kept = await settings.updated(path, settings.with_limits(engine.base_config, change))
    engine.adopt(kept)
    await engine.access.record_settings_change({"what": what})
