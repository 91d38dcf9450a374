"""`engine.vitals`: the gateway's own figures as the surfaces read them, `/metrics`' text
(`metrics`) and `/api/status`'s JSON (`status`, what `hearth status` prints): the counts since
this process started, with the figures read now (`engine/observe/figures.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hearth.engine.observe.counts import Counts, Histogram
from hearth.engine.observe.figures import Figures, gather
from hearth.engine.observe.observer import Observer
from hearth.models.breakers import BreakerView
from hearth.store.db import Database

if TYPE_CHECKING:
    from hearth.engine.observe.exposition import Exposition

JSON = dict[str, Any]


class Vitals:
    """Reads the store, the observer's counts, the turns running and the breakers."""

    def __init__(self, db: Database, observer: Observer, running: Callable[[], int],
                 breakers: Callable[[], list[BreakerView]]) -> None:
        self._db = db
        self._counts = observer.counts
        self._running = running
        self._breakers = breakers
        self._exposition: Exposition | None = None

    async def figures(self) -> Figures:
        return await gather(self._db, self._running(), self._breakers())

    async def metrics(self) -> bytes:
        """One scrape of `/metrics` (prometheus-client loaded, off the loop, the first time)."""
        figures = await self.figures()
        if self._exposition is None:
            self._exposition = await asyncio.to_thread(_exposition, self._counts)
        return self._exposition.render(figures)

    async def status(self) -> JSON:
        """The same at a glance, as JSON (see `status_of`)."""
        return status_of(self._counts, await self.figures())


def _exposition(counts: Counts) -> Exposition:
    from hearth.engine.observe.exposition import Exposition

    return Exposition(counts)


def status_of(counts: Counts, figures: Figures) -> JSON:
    """`/api/status`: the gateway, its turns, models, tools, deliveries, chores and store."""
    return {
        "version": figures.version, "db_engine": figures.db_engine,
        "started_at": counts.started,
        "turns": {"running": figures.running, "queued": figures.queued,
                  "chats_queued": len(figures.tallies.queues), "deepest": figures.deepest,
                  "ended": _ended(counts), "seconds": _timing(counts.turn_seconds)},
        "admission": _timing(counts.admission_seconds),
        "models": _models(counts, figures),
        "tools": _tools(counts),
        "deliveries": dict(sorted(figures.tallies.deliveries.items())),
        "owed_chores": dict(sorted(figures.tallies.owed.items())),
        "store": {"commits": counts.commit_seconds.count,
                  "commit_seconds": _timing(counts.commit_seconds)},
    }


def _ended(counts: Counts) -> dict[str, int]:
    by_code: dict[str, int] = {}
    for (code, _), n in counts.endings.items():
        by_code[code] = by_code.get(code, 0) + n
    return dict(sorted(by_code.items()))


def _timing(histogram: Histogram) -> JSON:
    """Count, mean, and the p50/p95 as bucket bounds (seconds; None: nothing timed)."""
    count = histogram.count
    return {"count": count, "mean": histogram.sum / count if count else None,
            "p50": histogram.quantile(0.5), "p95": histogram.quantile(0.95)}


def _models(counts: Counts, figures: Figures) -> list[JSON]:
    """Each model called or listed: calls (and those not ok), tokens, failovers, breaker."""
    shown: dict[str, JSON] = {}

    def of(model: str) -> JSON:
        return shown.setdefault(model, {"model": model, "calls": 0, "not_ok": 0,
                                        "tokens_in": 0, "tokens_out": 0, "failovers": 0,
                                        "breaker": None, "failures": 0})
    for view in figures.breakers:
        of(view.model_id).update(breaker=view.state, failures=view.failures)
    for (model, _, outcome), n in counts.model_calls.items():
        of(model)["calls"] += n
        of(model)["not_ok"] += n if outcome != "ok" else 0
    for (model, direction), n in counts.tokens.items():
        of(model)[f"tokens_{direction}"] += n
    for model, n in counts.failovers.items():
        of(model)["failovers"] += n
    return list(shown.values())


def _tools(counts: Counts) -> list[JSON]:
    return [{"tool": tool, "decision": decision, "status": status, "calls": n}
            for (tool, decision, status), n in sorted(counts.tool_calls.items())]
