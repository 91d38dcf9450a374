"""What the engine counts as it works, since this process started: turns by ending, model
calls and tokens by model, failovers, tool calls by tool and decision, and the time a turn,
an admission and a store commit took (histograms).

Plain in-process counters, not prometheus-client's: recording one costs a dict update, and
prometheus-client (~50 ms to import) is loaded at the first scrape, never at start
(`engine/observe/exposition.py` turns these into its families). Each is updated from one
thread only (the event loop; the store commits from the writer's thread), so none needs a
lock. Labels are the gateway's own names (an ending code, a model's id, a registered tool's
name, a decision word): never a chat's key, title or words.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

TURN_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
FAST_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
NO_TOOL = "unknown"  # the label of a call to a tool that does not exist (the model's word
#                      for it is never a label: it could be anything the chat said)


class Histogram:
    """Observations in buckets bounded above by `bounds` (seconds), and their sum."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it) per bucket, the last bound infinite."""
        total, out = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.buckets, strict=True):
            total += n
            out.append((bound, total))
        return out

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket the `q` quantile falls in (None: no observation;
        the largest bound when it falls above them all)."""
        count = self.count
        if not count:
            return None
        for bound, below in self.cumulative():
            if below >= q * count:
                return min(bound, self.bounds[-1])
        return self.bounds[-1]


@dataclass
class Counts:
    """Everything counted since `started` (seconds since the epoch)."""

    started: float = field(default_factory=time.time)
    endings: Counter[tuple[str, str]] = field(default_factory=Counter)  # (code, outcome)
    turn_seconds: Histogram = field(default_factory=lambda: Histogram(TURN_BOUNDS))
    admission_seconds: Histogram = field(default_factory=lambda: Histogram(FAST_BOUNDS))
    model_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #                                             (model, purpose, outcome)
    tokens: Counter[tuple[str, str]] = field(default_factory=Counter)  # (model, in | out)
    failovers: Counter[str] = field(default_factory=Counter)  # the model moved away from
    tool_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #                                            (tool, decision, status)
    commit_seconds: Histogram = field(default_factory=lambda: Histogram(FAST_BOUNDS))

    def model_call(self, model: str, purpose: str, outcome: str, tokens_in: int,
                   tokens_out: int) -> None:
        self.model_calls[model, purpose, outcome] += 1
        if tokens_in:
            self.tokens[model, "in"] += tokens_in
        if tokens_out:
            self.tokens[model, "out"] += tokens_out

    def tool_call(self, tool: str | None, decision: str, status: str) -> None:
        self.tool_calls[tool or NO_TOOL, decision, status] += 1
