"""A model call that ends without its provider's usage report is charged an estimate, never
$0: a stream cut mid-answer, a turn the user stopped mid-stream, an answer whose provider
sent no usage. The estimate is the input the reservation estimates (its length at
`CHARS_PER_TOKEN`) and the output streamed (`CHARS_PER_OUTPUT_TOKEN`), at the model's
prices; the call's row says it is estimated, the spending tally counts the same figure and
the reservation is let go. In-process engines against the scripted model server."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.config import Config
from hearth.engine.runtime import Engine
from hearth.models import guard, spending
from hearth.privacy.principal import OWNER
from hearth.store.schema import model_calls
from tests.engine_harness import make_engine, new_chat, run, turn
from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer

PRICE_IN, PRICE_OUT = 2.0, 10.0  # US dollars per million tokens


def _config(server: ScriptedModelServer) -> Config:
    """One priced model, a generous daily limit (so each call holds a reservation) and no
    chores after a turn."""
    return Config.model_validate({
        "tools": {"profile": "full"},
        "models": [{"id": "priced", "provider": "openai", "base_url": server.openai_base_url,
                    "api_key": "sk-test", "model": "m-priced", "max_output_tokens": 500,
                    "price_in_per_mtok": PRICE_IN, "price_out_per_mtok": PRICE_OUT}],
        "limits": {"usd_per_day": 5.0},
        "learning": {"every_turns": 1000}})


def _input_tokens(request: Recorded) -> int:
    """The input estimate of the request as it went out: its messages' and tools' length."""
    chars = sum(len(m["content"]) for m in request.messages if isinstance(m.get("content"), str))
    for tool in request.body.get("tools") or []:
        function = tool["function"]
        chars += len(function["description"]) + len(str(function["parameters"]))
    return math.ceil(chars / spending.CHARS_PER_TOKEN)


async def _turn_rows(engine: Engine) -> list[dict[str, Any]]:
    """The turns' call rows, once every row asked for is written."""
    recorder = guard.recorder()
    assert recorder is not None
    await recorder.settled()
    return await engine.db.reading(lambda conn: [dict(r._mapping) for r in conn.execute(
        select(model_calls).where(model_calls.c.purpose == "turn").order_by(model_calls.c.id))])


def _tally(engine: Engine) -> tuple[float, float]:
    """(spent today overall, reserved today overall)."""
    key = (spending.period_start("day", time.time()), "all", "")
    return engine.spending.spent[key], engine.spending.reserved[key]


def _assert_estimated(row: dict[str, Any], request: Recorded, streamed: str) -> None:
    tokens_out = math.ceil(len(streamed) / spending.CHARS_PER_OUTPUT_TOKEN)
    assert row["estimated"] is True
    assert row["tokens_in"] == pytest.approx(_input_tokens(request), rel=0.1)
    assert row["tokens_out"] == tokens_out > 0
    assert row["cost_usd"] == pytest.approx(
        (row["tokens_in"] * PRICE_IN + tokens_out * PRICE_OUT) / 1e6)


def test_a_stream_cut_mid_answer_is_charged_its_estimate(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    cut = Reply(text="one two three four five six seven eight", chunks=8, cut_after=3)
    model_server.push(cut)
    engine = make_engine(tmp_path, _config(model_server))

    async def body() -> tuple[dict[str, Any], list[dict[str, Any]], tuple[float, float]]:
        await engine.start()
        view = await turn(engine, new_chat(engine), "count for me")
        rows = await _turn_rows(engine)
        await engine.close()
        return view, rows, _tally(engine)

    view, rows, (spent, reserved) = run(body())
    assert view["ending"] == "cut_off"
    [row] = rows
    assert row["outcome"] == "cut_off"
    _assert_estimated(row, model_server.requests[0], "".join(cut.text_pieces()[:3]))
    assert spent == pytest.approx(row["cost_usd"]) and spent > 0  # counted, never $0
    assert reserved == 0  # the reservation is let go


def test_a_turn_stopped_mid_stream_is_charged_its_estimate(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    slow = Reply(text="first words then a long pause", chunks=5, stall=30, stall_after=2)
    model_server.push(slow)
    engine = make_engine(tmp_path, _config(model_server))

    async def body() -> tuple[str, list[dict[str, Any]], tuple[float, float]]:
        await engine.start()
        key = new_chat(engine)
        sent = await engine.send(key, "talk slowly", principal=OWNER)
        while not engine.bus.streaming(key):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # the second piece arrives right after the first
        assert await engine.stop(key) == sent.run_id
        await engine.bus.wait_run(sent.run_id, 5)
        rows = await _turn_rows(engine)
        await engine.close()
        return sent.run_id, rows, _tally(engine)

    _, rows, (spent, reserved) = run(body())
    [row] = rows
    assert row["outcome"] == "cut_off"
    _assert_estimated(row, model_server.requests[0], "".join(slow.text_pieces()[:2]))
    assert spent == pytest.approx(row["cost_usd"]) and spent > 0
    assert reserved == 0


def test_an_answer_whose_provider_sent_no_usage_is_charged_its_estimate(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """A server that reports no usage (0 tokens either way) finished the answer: the
    estimate counts all of it."""
    model_server.push(Reply(text="a whole answer, its usage unsaid", usage=(0, 0)))
    engine = make_engine(tmp_path, _config(model_server))
    engine.deps = replace(engine.deps, after_turn=lambda run, session: None)  # no title

    async def body() -> tuple[dict[str, Any], list[dict[str, Any]], tuple[float, float]]:
        await engine.start()
        view = await turn(engine, new_chat(engine), "answer me")
        rows = await _turn_rows(engine)
        await engine.close()
        return view, rows, _tally(engine)

    view, [row], (spent, _) = run(body())
    assert view["status"] == "complete" and row["outcome"] == "ok"
    _assert_estimated(row, model_server.requests[0], "a whole answer, its usage unsaid")
    assert spent == pytest.approx(row["cost_usd"]) and spent > 0


def test_a_call_the_provider_refused_before_answering_costs_nothing(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """The estimate is for answers that began (or were stopped): an HTTP error is no
    answer, and is recorded at $0, not estimated."""
    model_server.push(*[Reply(status=400) for _ in range(3)])
    engine = make_engine(tmp_path, _config(model_server))

    async def body() -> tuple[list[dict[str, Any]], tuple[float, float]]:
        await engine.start()
        await turn(engine, new_chat(engine), "hello")
        rows = await _turn_rows(engine)
        await engine.close()
        return rows, _tally(engine)

    rows, (spent, reserved) = run(body())
    assert rows and all(r["cost_usd"] == 0.0 and not r["estimated"] for r in rows)
    assert spent == 0 and reserved == 0
