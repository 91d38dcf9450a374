"""Traces of turns (engine/observe/traces.py) through the SDK's InMemorySpanExporter: one span
per turn, a child for each model call, tool call and store commit, the run and (for a
persistent chat only) the chat on it, never a word of the chat; and no tracing at all unless
an endpoint is configured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hearth.engine.observe.traces import Tracing
from hearth.engine.runtime import Engine
from hearth.privacy.principal import OWNER
from hearth.sessions import chats
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome
from tests.engine_harness import make_config, make_engine, run, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

ASKED = "tell me about the quokka-umbrella"
TOOL_SAID = "the parrot-lantern glows"


class Echo:
    """A read-only tool that answers with a fixed sentence."""

    name = "echo"
    description = "Echo."
    parameters: dict[str, Any] = {"type": "object", "properties": {"say": {"type": "string"}}}
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(output=TOOL_SAID, receipt="Echoed.")


def traced_turn(tmp_path: Path, model_server: ScriptedModelServer, mode: str | None
                ) -> tuple[dict[str, Any], str, list[ReadableSpan]]:
    """One turn with one tool call in a new chat of `mode`, traced: its run, chat, spans."""
    exporter = InMemorySpanExporter()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [Echo()])
    engine.observer.tracing = Tracing.exporting(exporter)
    model_server.push(Reply(tool_calls=[Call("echo", {"say": "quokka-umbrella"})],
                            usage=(12, 3)),
                      Reply(text="The quokka-umbrella is fine.", usage=(30, 6)))

    async def body() -> tuple[dict[str, Any], str]:
        await engine.start()
        try:
            key = await _chat(engine, mode)
            return await turn(engine, key, ASKED), key
        finally:
            await engine.close()

    view, key = run(body())
    return view, key, list(exporter.get_finished_spans())


async def _chat(engine: Engine, mode: str | None) -> str:
    opened = await chats.open_chat(engine.db, memory_mode=mode, trust="trusted")
    return opened.session.key


def the_turn(spans: list[ReadableSpan]) -> ReadableSpan:
    turns = [span for span in spans if span.name == "hearth.turn"]
    assert len(turns) == 1, [span.name for span in spans]
    return turns[0]


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [span for span in spans if span.parent is not None
            and span.parent.span_id == parent.context.span_id]


def test_a_turn_is_one_span_with_its_calls_and_commits_under_it(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    view, key, spans = traced_turn(tmp_path, model_server, None)
    assert view["status"] == "complete"
    root = the_turn(spans)
    assert root.parent is None
    assert dict(root.attributes or {}) == {"hearth.run_id": view["run_id"],
                                           "hearth.run_kind": "chat", "hearth.chat": key,
                                           "hearth.ending": "complete"}
    under = children(spans, root)
    assert {span.name for span in spans} - {"hearth.turn"} == {span.name for span in under}
    calls = [span for span in under if span.name == "hearth.model_call"]
    assert [(c.attributes or {}).get("gen_ai.usage.input_tokens") for c in calls] == [12, 30]
    assert {(c.attributes or {}).get("hearth.purpose") for c in calls} == {"turn"}
    assert {(c.attributes or {}).get("gen_ai.request.model") for c in calls} == {"fake"}
    tools = [span for span in under if span.name == "hearth.tool_call"]
    assert [dict(t.attributes or {}) for t in tools] == [
        {"hearth.tool": "echo", "hearth.decision": "allowed", "hearth.status": "finished"}]
    commits = [span for span in under if span.name == "hearth.store_commit"]
    assert len(commits) >= 3  # the tool call started and ended, the answer, the ending
    assert root.start_time is not None and root.end_time is not None
    for span in under:
        assert span.context is not None and root.context is not None
        assert span.context.trace_id == root.context.trace_id
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time


def test_no_span_carries_a_word_of_the_chat(tmp_path: Path,
                                            model_server: ScriptedModelServer) -> None:
    _, _, spans = traced_turn(tmp_path, model_server, None)
    said = [str(value) for span in spans for value in (span.attributes or {}).values()]
    assert said and not [value for value in said
                         if "quokka" in value or "parrot" in value or "fine" in value]


def test_a_restricted_chats_key_is_on_no_span(tmp_path: Path,
                                             model_server: ScriptedModelServer) -> None:
    view, key, spans = traced_turn(tmp_path, model_server, "incognito")
    root = the_turn(spans)
    assert (root.attributes or {}).get("hearth.run_id") == view["run_id"]
    assert "hearth.chat" not in (root.attributes or {})
    assert not [span for span in spans
                for value in (span.attributes or {}).values() if key in str(value)]


def test_tracing_is_off_unless_an_endpoint_is_named() -> None:
    assert not Tracing().on and Tracing().begin_turn("run", "chat", "key") is None
    assert not Tracing.configured(None, environ={}).on
    assert Tracing.configured("http://127.0.0.1:9", environ={}).on
    from_env = Tracing.configured(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert from_env.on
    from_env.close()


def test_an_untraced_turn_still_counts(tmp_path: Path,
                                      model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), [Echo()])
    assert not engine.observer.tracing.on
    model_server.push(Reply(tool_calls=[Call("echo", {})]), Reply(text="Done."))

    async def body() -> None:
        await engine.start()
        try:
            key = await _chat(engine, None)
            await turn(engine, key, "go")
            await engine.send(key, "again", principal=OWNER)  # admitted, counted
        finally:
            await engine.close()

    run(body())
    counts = engine.observer.counts
    assert counts.tool_calls == {("echo", "allowed", "finished"): 1}
    assert counts.endings["complete", "complete"] >= 1
    assert counts.admission_seconds.count == 2 and counts.turn_seconds.count >= 1
