"""The engine's one observer: where the seams that already see the work tell what they saw,
counted (`Counts`) and, when traces are on, traced (`Tracing`).

The seams: the call recorder at each model call's end (`call_ended`, installed by
`engine/compose.py`), the one writer after each commit (`committed`, in its thread), the bus
for every ending the engine publishes (`heard`: a `done` frame of this gateway's, never one
heard from another replica), the runtime around an admission (`admitted`), and, inside a
turn, the tool calls and failovers (`tool_called`, `failed_over`, reaching the turn's
`Watch` through a context variable that `watching` sets for the turn and every task and
thread it starts, as `privacy.scope` does). A tool call or failover outside a watched turn
is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hearth.engine.observe.counts import Counts
from hearth.engine.observe.traces import Tracing
from hearth.models.calls import Call
from hearth.privacy.modes import keeps_memory, mode_of
from hearth.store.model_calls import CallRow
from hearth.store.writer import Job

if TYPE_CHECKING:
    from opentelemetry.trace import Span


@dataclass
class Watch:
    """The turn being watched: where its counts go, and its span (None: traces are off)."""

    run_id: str
    counts: Counts
    tracing: Tracing
    span: Span | None
    ending: str | None = None  # its ending's code, once published (put on its span)


_watch: ContextVar[Watch | None] = ContextVar("hearth_watch", default=None)


class Observer:
    """Counts (always) and traces (when `tracing` is on) of one engine's work."""

    def __init__(self, tracing: Tracing | None = None) -> None:
        self.counts = Counts()
        self.tracing = tracing or Tracing()

    @contextmanager
    def watching(self, run_id: str, kind: str, chat_key: str, mode: object,
                 timed: bool = True) -> Iterator[Watch]:
        """Watch a run's work inside: its span (the chat's key on it only when the chat
        keeps memory: `mode`, read by the one reader, failing closed), and with `timed` its
        time counted as a turn's."""
        began = time.monotonic()
        kept = keeps_memory(mode_of(mode))
        span = self.tracing.begin_turn(run_id, kind, chat_key if kept else None)
        watch = Watch(run_id, self.counts, self.tracing, span)
        token = _watch.set(watch)
        try:
            yield watch
        finally:
            _watch.reset(token)
            if timed:
                self.counts.turn_seconds.observe(time.monotonic() - began)
            self.tracing.end_turn(span, watch.ending)
            watch.span = None  # a task the run started and left behind (a chore) is not in it

    def call_ended(self, call: Call, row: CallRow) -> None:
        """A model call ended (the recorder's row: model, purpose, outcome, tokens)."""
        self.counts.model_call(row.model_id, row.purpose, row.outcome, row.tokens_in,
                               row.tokens_out)
        watch = _watch.get()
        if watch is not None and watch.span is not None:
            watch.tracing.child(watch.span, "hearth.model_call", row.duration_ms / 1000, {
                "gen_ai.request.model": row.model_id, "hearth.purpose": row.purpose,
                "hearth.outcome": row.outcome, "gen_ai.usage.input_tokens": row.tokens_in,
                "gen_ai.usage.output_tokens": row.tokens_out}, failed=row.outcome != "ok")

    def committed(self, seconds: float, batch: Sequence[Job]) -> None:
        """The writer committed `batch` in `seconds` (its thread): timed, and a span under
        each watched turn one of its jobs was for."""
        self.counts.commit_seconds.observe(seconds)
        if not self.tracing.on:
            return
        spans = {id(w.span): w.span for job in batch
                 if (w := job.context.get(_watch)) is not None and w.span is not None}
        durable = any(job.durable for job in batch)
        for span in spans.values():
            self.tracing.child(span, "hearth.store_commit", seconds,
                               {"hearth.jobs": len(batch), "hearth.durable": durable})

    def heard(self, session_key: str, frame: dict[str, Any]) -> None:
        """A frame this gateway published: a `done` counts its ending (and names it on the
        watched run's span, when it is that run's: published inside its watch)."""
        if frame.get("type") != "done":
            return
        code = str(frame.get("ending"))
        self.counts.endings[code, str(frame.get("outcome"))] += 1
        watch = _watch.get()
        if watch is not None and watch.run_id == frame.get("run_id"):
            watch.ending = code

    def admitted(self, seconds: float) -> None:
        """A message was admitted (its run and words on disk) in `seconds`."""
        self.counts.admission_seconds.observe(seconds)

    def close(self) -> None:
        """Send the traces still batched (blocking: from a thread)."""
        self.tracing.close()


def tool_called(tool: str | None, decision: str, status: str, began: float) -> None:
    """A tool call of the watched turn ended: `tool` (None: no such tool), the gate's
    `decision` (allowed, refused; invalid: it never reached the gate), the ledger's `status`
    (finished, failed; not_run), begun at `began` (monotonic)."""
    watch = _watch.get()
    if watch is None:
        return
    watch.counts.tool_call(tool, decision, status)
    if watch.span is not None:
        watch.tracing.child(watch.span, "hearth.tool_call", time.monotonic() - began, {
            "hearth.tool": tool or "unknown", "hearth.decision": decision,
            "hearth.status": status}, failed=status == "failed")


def failed_over(model_id: str) -> None:
    """The watched turn moved away from `model_id`, which failed."""
    watch = _watch.get()
    if watch is not None:
        watch.counts.failovers[model_id] += 1
