"""The engine's own counters and histograms (engine/observe/counts.py) and their exposition:
Prometheus' bucket rule (an observation counts in every bucket whose bound is at or above
it), the quantiles `hearth status` shows, a tool the model made up never a label, and a
failover counted by the model that failed."""

from __future__ import annotations

from pathlib import Path

from hearth.config import Config
from hearth.engine.observe.counts import Counts, Histogram
from hearth.engine.observe.exposition import Exposition
from hearth.engine.observe.figures import Figures
from hearth.models.breakers import BreakerView
from hearth.sessions import chats
from hearth.store.tallies import Tallies
from tests.engine_harness import make_engine, run, turn
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.metrics import parse


def test_an_observation_on_a_bound_counts_in_that_bucket() -> None:
    histogram = Histogram((0.1, 1.0))
    for seconds in (0.1, 0.5, 1.0, 7.0):
        histogram.observe(seconds)
    assert histogram.cumulative() == [(0.1, 1), (1.0, 3), (float("inf"), 4)]
    assert histogram.count == 4 and histogram.sum == 8.6
    assert histogram.quantile(0.25) == 0.1 and histogram.quantile(0.5) == 1.0
    assert histogram.quantile(1.0) == 1.0  # above every bound: the largest is said
    assert Histogram((1.0,)).quantile(0.5) is None


def test_the_exposition_is_what_was_counted() -> None:
    counts = Counts()
    counts.endings["complete", "complete"] += 2
    counts.model_call("m1", "turn", "ok", 10, 4)
    counts.model_call("m1", "title", "failed", 0, 0)
    counts.tool_call(None, "invalid", "not_run")  # a tool the model named that does not exist
    counts.commit_seconds.observe(0.002)
    figures = Figures("9.9", "sqlite", 1, Tallies((3, 1), {"sent": 5}, {"title": 2}),
                      [BreakerView("m1", "open", 0.0, 3)])
    scraped = parse(Exposition(counts).render(figures).decode())
    assert scraped.value("hearth_turns_ended_total", ending="complete", outcome="complete") == 2
    assert scraped.value("hearth_model_calls_total", model="m1", purpose="title",
                         outcome="failed") == 1
    assert scraped.value("hearth_model_tokens_total", model="m1", direction="out") == 4
    assert scraped.value("hearth_tool_calls_total", tool="unknown", decision="invalid",
                         status="not_run") == 1
    assert scraped.value("hearth_turns_queued") == 4
    assert scraped.value("hearth_lanes_queued") == 2
    assert scraped.value("hearth_lane_queue_depth_max") == 3
    assert scraped.value("hearth_deliveries", state="sent") == 5
    assert scraped.value("hearth_deliveries", state="unknown") == 0
    assert scraped.value("hearth_owed_chores", kind="title") == 2
    assert scraped.value("hearth_model_breaker_state", model="m1", state="open") == 1
    assert scraped.value("hearth_model_breaker_state", model="m1", state="closed") == 0
    assert scraped.value("hearth_model_breaker_failures", model="m1") == 3
    assert scraped.value("hearth_store_commit_seconds_bucket", le="0.0025") == 1
    assert scraped.value("hearth_store_commit_seconds_bucket", le="0.001") == 0


def test_a_failover_is_counted_by_the_model_that_failed(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    models = [{"id": name, "provider": "openai", "base_url": model_server.openai_base_url,
               "api_key": "sk-test", "model": f"m{name}"} for name in ("a", "b", "bg")]
    config = Config.model_validate({"models": models, "chains": {
        "chat": ["a", "b"], "background": ["bg"]}})
    engine = make_engine(tmp_path, config, [])
    model_server.push(Reply(status=503), model="ma")
    model_server.push(Reply(text="From b."), model="mb")

    async def body() -> str:
        await engine.start()
        try:
            opened = await chats.open_chat(engine.db, trust="trusted")
            return str((await turn(engine, opened.session.key, "hello"))["status"])
        finally:
            await engine.close()

    assert run(body()) == "complete"
    counts = engine.observer.counts
    assert counts.failovers == {"a": 1}
    assert counts.model_calls["a", "turn", "failed"] == 1
    assert counts.model_calls["b", "turn", "ok"] == 1
    assert counts.endings == {("complete", "complete"): 1}
