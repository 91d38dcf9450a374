"""The dashboard's Usage page: model calls, tokens and cost over the last days (UTC), added up
from the per-call record, as a bar chart of tokens per day (inline SVG drawn by the template
from the geometry computed here: no script, no inline style) and as tables per model, per
purpose (a turn, a chore, a Settings Test …), per provider and per day with the same
numbers. A model with no price shows "unpriced", never "$0". Above them: each spending limit
set, with what was spent against it, and the cost per day drawn against the daily limit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from hearth.engine.reads.facade import Total, today
from hearth.web.http import spending
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.params import span_of
from hearth.web.pages.frame import page

pages = APIRouter(dependencies=[Depends(require_token)])

CHART_WIDTH = 640
CHART_TOP = 16  # room for the scale's label
CHART_BASE = 196  # the baseline: bars grow up from here
CHART_HEIGHT = 220  # the day labels sit under the baseline
BAR_SHARE = 0.7  # of each day's slot; the rest is the gap between bars


@dataclass(frozen=True)
class Bar:
    day: str
    x: float
    width: float
    in_y: float
    in_height: float
    out_y: float
    out_height: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    base: int
    top: int
    bars: list[Bar]
    peak: str  # the tallest day's tokens, said at the top of the scale
    label: str  # what the chart shows, for a screen reader


@dataclass(frozen=True)
class Row:
    """One line of a table, its numbers formatted."""

    name: str
    calls: str
    tokens_in: str
    tokens_out: str
    cost: str


def money(cost: float) -> str:
    if cost == 0:
        return "$0.00"
    if cost >= 0.01:
        return f"${cost:,.2f}"
    small = f"{cost:.6f}".rstrip("0")
    return f"${small}" if small != "0." else "< $0.000001"


def cost_text(total: Total) -> str:
    """The cost of a total, saying "unpriced" for calls made at no known price."""
    if total.cost_usd is None:
        return "unpriced"
    if total.unpriced_calls:
        plural = "s" if total.unpriced_calls != 1 else ""
        return f"{money(total.cost_usd)} + {total.unpriced_calls} unpriced call{plural}"
    return money(total.cost_usd)


def row_of(total: Total) -> Row:
    return Row(total.key, f"{total.calls:,}", f"{total.tokens_in:,}", f"{total.tokens_out:,}",
               cost_text(total))


def sum_of(totals: list[Total], name: str) -> Total:
    costs = [t.cost_usd for t in totals if t.cost_usd is not None]
    return Total(name, sum(t.calls for t in totals), sum(t.tokens_in for t in totals),
                 sum(t.tokens_out for t in totals), sum(costs) if costs else None,
                 sum(t.unpriced_calls for t in totals))


def chart_of(span: list[str], days: list[Total]) -> Chart:
    """Stacked bars (tokens in below, out above) for every day of the span, to one scale."""
    found = {t.key: t for t in days if span[0] <= t.key <= span[-1]}
    peak = max((t.tokens_in + t.tokens_out for t in found.values()), default=0)
    scale = (CHART_BASE - CHART_TOP) / peak if peak else 0.0
    slot = CHART_WIDTH / len(span)
    bars = []
    for index, day in enumerate(span):
        total = found.get(day, Total(day, 0, 0, 0, None, 0))
        in_height = round(total.tokens_in * scale, 2)
        out_height = round(total.tokens_out * scale, 2)
        bars.append(Bar(day, round(index * slot + slot * (1 - BAR_SHARE) / 2, 2),
                        round(slot * BAR_SHARE, 2), round(CHART_BASE - in_height, 2),
                        in_height, round(CHART_BASE - in_height - out_height, 2), out_height,
                        f"{day}: {total.tokens_in:,} tokens in, {total.tokens_out:,} out"))
    sums = sum_of(list(found.values()), "all")
    label = (f"Tokens per day from {span[0]} to {span[-1]} (UTC): {sums.tokens_in:,} in and "
             f"{sums.tokens_out:,} out in all; the busiest day had {peak:,}.")
    return Chart(CHART_WIDTH, CHART_HEIGHT, CHART_BASE, CHART_TOP, bars, f"{peak:,}", label)


@dataclass(frozen=True)
class ModelBar:
    name: str
    y: float
    width: float
    label: str  # tokens and cost, said beside the bar and to a screen reader


@dataclass(frozen=True)
class ModelChart:
    width: int
    height: int
    bars: list[ModelBar]
    label: str


MODEL_ROW = 28  # each model's row in the per-model chart
MODEL_NAME_WIDTH = 160  # the names sit left of the bars
MODEL_LABEL_ROOM = 210  # the figures sit right of the longest bar


def model_chart_of(models: list[Total]) -> ModelChart:
    """One horizontal bar of tokens (in and out) per model, the busiest first, to one scale,
    with its cost."""
    models = sorted(models, key=lambda t: (-(t.tokens_in + t.tokens_out), t.key))
    peak = max((t.tokens_in + t.tokens_out for t in models), default=0)
    room = CHART_WIDTH - MODEL_NAME_WIDTH - MODEL_LABEL_ROOM
    bars = [ModelBar(t.key, index * MODEL_ROW,
                     round((t.tokens_in + t.tokens_out) * room / peak, 2) if peak else 0.0,
                     f"{t.tokens_in + t.tokens_out:,} tokens, {cost_text(t)}")
            for index, t in enumerate(models)]
    label = "Tokens per model: " + "; ".join(f"{b.name}: {b.label}" for b in bars) + "."
    return ModelChart(CHART_WIDTH, max(len(bars), 1) * MODEL_ROW, bars, label)


@dataclass(frozen=True)
class CostBar:
    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True)
class CostChart:
    width: int
    height: int
    base: int
    top: int
    bars: list[CostBar]
    peak: str
    limit_y: float | None  # where the overall daily limit's line is drawn (None: no limit)
    limit: str
    label: str
    first: str
    last: str


def cost_chart_of(span: list[str], days: list[Total], daily: float | None) -> CostChart | None:
    """One bar of US dollars per day of the span, to one scale that reaches the daily limit
    (drawn as a line), or None when no day had a priced call."""
    found = {t.key: t.cost_usd or 0.0 for t in days if span[0] <= t.key <= span[-1]}
    if not any(found.values()):
        return None
    peak = max([*found.values(), daily or 0.0])
    scale = (CHART_BASE - CHART_TOP) / peak
    slot = CHART_WIDTH / len(span)
    bars = [CostBar(round(i * slot + slot * (1 - BAR_SHARE) / 2, 2),
                    round(CHART_BASE - found.get(day, 0.0) * scale, 2), round(slot * BAR_SHARE, 2),
                    round(found.get(day, 0.0) * scale, 2), f"{day}: {money(found.get(day, 0.0))}")
            for i, day in enumerate(span)]
    limit_y = None if daily is None else round(CHART_BASE - daily * scale, 2)
    said = f"; the daily limit is {money(daily)}" if daily is not None else ""
    label = (f"Cost per day from {span[0]} to {span[-1]} (UTC): {money(sum(found.values()))} "
             f"in all{said}.")
    return CostChart(CHART_WIDTH, CHART_HEIGHT, CHART_BASE, CHART_TOP, bars, money(peak),
                     limit_y, money(daily) if daily is not None else "", label, span[0], span[-1])


@pages.get("/usage")
async def usage_page(request: Request, engine: EngineDep,
                     days: Annotated[int, Query(ge=1, le=366)] = 30) -> Response:
    span = span_of(days, date.fromisoformat(today()))
    found = await engine.reads.usage_totals(span[0])
    by_day, by_model = found.by_day, found.by_model
    return await page(request, engine, "usage.html", days=days,
                  chart=chart_of(span, by_day) if by_day else None,
                  cost_chart=cost_chart_of(span, by_day, engine.spending.limits().usd_per_day),
                  limits=spending.standing(engine),
                  model_chart=model_chart_of(by_model) if by_model else None,
                  name_width=MODEL_NAME_WIDTH,
                  models=[row_of(t) for t in by_model],
                  model_total=row_of(sum_of(by_model, "All models")),
                  purposes=[row_of(t) for t in found.by_purpose],
                  providers=[row_of(t) for t in found.by_provider],
                  day_rows=[row_of(t) for t in reversed(by_day)])
