"""`/metrics` in the Prometheus text format, by prometheus-client: the counts (`Counts`) and
the figures read at the scrape (`Figures`) turned into metric families by a collector of our
own, in a registry of this engine's own (never the global default one), with the process's
own figures (CPU, memory, open files) beside them. Imported at the first scrape only.

Every name and label is in docs/metrics.md's table ("Metrics and traces"); a label is never a
chat's key, title or words.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from hearth.engine.observe.counts import Counts, Histogram
from hearth.engine.observe.figures import Figures

BREAKER_STATES = ("closed", "half-open", "open")
ALWAYS_SHOWN = ("failed", "unknown")  # delivery states shown at 0 too: what waits on the owner


class Exposition(Collector):
    """The engine's metrics: `render(figures)` is one scrape."""

    def __init__(self, counts: Counts) -> None:
        self._counts = counts
        self._figures: Figures | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        self.registry.register(self)

    def render(self, figures: Figures) -> bytes:
        """The text of one scrape with `figures` (no await between: one scrape at a time)."""
        self._figures = figures
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        if self._figures is None:
            return
        yield from _turns(self._counts, self._figures)
        yield from _models(self._counts, self._figures)
        yield from _tools_and_store(self._counts, self._figures)


def _turns(counts: Counts, figures: Figures) -> Iterator[Metric]:
    info = GaugeMetricFamily("hearth_info", "This gateway: its version and database engine.",
                             labels=["version", "db_engine"])
    info.add_metric([figures.version, figures.db_engine], 1)
    yield info
    ended = CounterMetricFamily("hearth_turns_ended", "Turns (runs) ended, by ending code "
                                "and outcome.", labels=["ending", "outcome"])
    for (code, outcome), n in sorted(counts.endings.items()):
        ended.add_metric([code, outcome], n)
    yield ended
    yield _histogram("hearth_turn_seconds", "A turn's time from its start to its ending.",
                     counts.turn_seconds)
    yield _histogram("hearth_admission_seconds", "A message's admission: its run and words "
                     "written, before it is acknowledged.", counts.admission_seconds)
    yield _gauge("hearth_turns_running", "Turns running in this gateway now.", figures.running)
    yield _gauge("hearth_turns_queued", "Admitted runs waiting for their turn, in every chat.",
                 figures.queued)
    yield _gauge("hearth_lanes_queued", "Chats with a run waiting.", len(figures.tallies.queues))
    yield _gauge("hearth_lane_queue_depth_max", "The most runs waiting in one chat.",
                 figures.deepest)


def _models(counts: Counts, figures: Figures) -> Iterator[Metric]:
    calls = CounterMetricFamily("hearth_model_calls", "Model calls ended, by model, purpose "
                                "and outcome.", labels=["model", "purpose", "outcome"])
    for labels, n in sorted(counts.model_calls.items()):
        calls.add_metric(list(labels), n)
    yield calls
    tokens = CounterMetricFamily("hearth_model_tokens", "Tokens the models read (in) and "
                                 "wrote (out).", labels=["model", "direction"])
    for (model, direction), n in sorted(counts.tokens.items()):
        tokens.add_metric([model, direction], n)
    yield tokens
    moved = CounterMetricFamily("hearth_model_failovers", "Turns moved to another model, by "
                                "the model that failed.", labels=["model"])
    for model, n in sorted(counts.failovers.items()):
        moved.add_metric([model], n)
    yield moved
    state = GaugeMetricFamily("hearth_model_breaker_state", "Each model's breaker: 1 for its "
                              "state now, 0 for the others.", labels=["model", "state"])
    failures = GaugeMetricFamily("hearth_model_breaker_failures", "Each model's failures in a "
                                 "row.", labels=["model"])
    for view in figures.breakers:
        for name in BREAKER_STATES:
            state.add_metric([view.model_id, name], int(view.state == name))
        failures.add_metric([view.model_id], view.failures)
    yield state
    yield failures


def _tools_and_store(counts: Counts, figures: Figures) -> Iterator[Metric]:
    tools = CounterMetricFamily("hearth_tool_calls", "Tool calls, by tool, the gate's decision "
                                "and the ledger's status.", labels=["tool", "decision", "status"])
    for (tool, decision, status), n in sorted(counts.tool_calls.items()):
        tools.add_metric([tool, decision, status], n)
    yield tools
    deliveries = GaugeMetricFamily("hearth_deliveries", "Messages in the delivery ledger, by "
                                   "state.", labels=["state"])
    shown = {**dict.fromkeys(ALWAYS_SHOWN, 0), **figures.tallies.deliveries}
    for name, n in sorted(shown.items()):
        deliveries.add_metric([name], n)
    yield deliveries
    owed = GaugeMetricFamily("hearth_owed_chores", "Background chores owed (no model could do "
                             "them yet), by kind.", labels=["kind"])
    for kind, n in sorted(figures.tallies.owed.items()):
        owed.add_metric([kind], n)
    yield owed
    yield _histogram("hearth_store_commit_seconds", "The one writer's transactions, begin to "
                     "commit (a batch of writes each).", counts.commit_seconds)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _histogram(name: str, documentation: str, histogram: Histogram) -> HistogramMetricFamily:
    buckets = [(floatToGoString(bound), n) for bound, n in histogram.cumulative()]
    return HistogramMetricFamily(name, documentation, buckets=buckets,
                                 sum_value=histogram.sum)
