"""Traces of turns, in OpenTelemetry: one span per turn, a child for each model call, each
tool call and each store commit that held one of the turn's writes.

Off unless configured: `[telemetry] otlp_endpoint` (a collector's base address; spans go to
its `/v1/traces`), or OpenTelemetry's own `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
`OTEL_EXPORTER_OTLP_ENDPOINT`, sends them over OTLP/HTTP, batched by the SDK's own thread (a
turn never waits on an export). Off, nothing of OpenTelemetry is imported and a turn pays
one attribute check; OpenTelemetry is the `hearth[telemetry]` extra, and traces set up
without it refuse to start (`hearth.extras`). Each engine has a tracer provider of its own,
never the global one, so several engines in one process (the tests) do not mix; `exporting`
is the tests' hook (the SDK's InMemorySpanExporter).

A turn's span (`hearth.turn`) carries its run id and kind, and its chat's key only when the
chat is persistent (a restricted chat's key is kept nowhere, as `models/calls.py` keeps none
on a call's row). A child is made when its work ends, timed back from that end: a model call
(`hearth.model_call`: model, purpose, outcome, tokens), a tool call (`hearth.tool_call`: the
tool's name, the gate's decision, the ledger's status), a commit (`hearth.store_commit`: the
jobs in its batch, whether synced). No attribute carries a message's text, a tool's
arguments or its output.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hearth import __version__
from hearth.extras import require

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger(__name__)

TRACES_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
Attributes = Mapping[str, str | int | bool]


class Tracing:
    """One engine's tracer, or none (`on` is False: every method returns at once)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._tracer: Tracer | None = (provider.get_tracer("hearth", __version__)
                                       if provider is not None else None)

    @property
    def on(self) -> bool:
        return self._tracer is not None

    @classmethod
    def configured(cls, endpoint: str | None,
                   environ: Mapping[str, str] | None = None) -> Tracing:
        """Sending to `endpoint` (a base address), else where OpenTelemetry's variables say;
        off when neither names one."""
        environ = os.environ if environ is None else environ
        if not endpoint and not any(environ.get(name) for name in TRACES_ENV):
            return cls()
        require("telemetry")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = (OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
                    if endpoint else OTLPSpanExporter())  # it reads the variables itself
        log.info("traces are sent over OTLP/HTTP")
        return cls(_provider(BatchSpanProcessor(exporter)))

    @classmethod
    def exporting(cls, exporter: SpanExporter) -> Tracing:
        """Each span handed to `exporter` as it ends (the tests' InMemorySpanExporter)."""
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        return cls(_provider(SimpleSpanProcessor(exporter)))

    def begin_turn(self, run_id: str, kind: str, chat: str | None) -> Span | None:
        """A turn's span, begun now (None when off); `chat`: a persistent chat's key."""
        if self._tracer is None:
            return None
        from opentelemetry.context import Context

        attributes: dict[str, str] = {"hearth.run_id": run_id, "hearth.run_kind": kind}
        if chat is not None:
            attributes["hearth.chat"] = chat
        return self._tracer.start_span("hearth.turn", context=Context(), attributes=attributes)

    def end_turn(self, span: Span | None, ending: str | None) -> None:
        if span is None:
            return
        if ending is not None:
            span.set_attribute("hearth.ending", ending)
        span.end()

    def child(self, parent: Span, name: str, seconds: float, attributes: Attributes,
              failed: bool = False) -> None:
        """A span under `parent` that ended now, begun `seconds` ago."""
        if self._tracer is None:
            return
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        ended = time.time_ns()
        span = self._tracer.start_span(name, context=trace.set_span_in_context(parent),
                                       start_time=ended - int(seconds * 1e9),
                                       attributes=attributes)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=ended)

    def close(self) -> None:
        """Send what is still batched and stop (blocking: from a thread)."""
        if self._provider is not None:
            self._provider.shutdown()


def _provider(processor: SpanProcessor) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": "hearth",
                                                        "service.version": __version__}))
    provider.add_span_processor(processor)
    return provider
