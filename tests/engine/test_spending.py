"""Spending limits hold before the call: a priced model's turns count against the daily and
monthly limits of [limits] (overall, per agent, per app, each job); the call that would pass
one is not made (the model server sees no request), the turn ends `spending_limit` with a
sentence naming the limit, what was spent and when it resets (an app's turn refused with
429: tests/web/test_spending_apps.py); a job's fire is skipped and said in its chat; an
unpriced model is never held. In-process, real turns against the scripted model server."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from hearth.config import Config
from hearth.models import spending
from hearth.models.spending import Account, Cap, Spending
from hearth.models.types import Message, ModelRequest
from hearth.store.schema import model_calls, sessions
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.dashboard import api_chat, api_turn, dashboard, store_of
from tests.support.models import priced_config
from tests.support.polling import until

# `priced`: $2 in and $10 out per million tokens, answers cost 1000 in + 500 out = $0.007
COST = (1000 * 2.0 + 500 * 10.0) / 1_000_000


def _limited(server: ScriptedModelServer, **limits: Any) -> Config:
    """`priced_config` with these [limits] and the priced model's output allowance at 500
    tokens (so one call reserves at most its input and $0.005 of output)."""
    raw = priced_config(server).model_dump()
    raw["models"][0]["max_output_tokens"] = 500
    raw["limits"].update(limits)
    raw["learning"] = {"every_turns": 1000}
    return Config.model_validate(raw)


def _client(tmp_path: Path, config: Config) -> Any:
    return dashboard(tmp_path / "home", config, csrf=True)


def _no_chores(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    engine.deps = replace(engine.deps, after_turn=lambda run, session: None)


def test_turns_until_the_daily_limit_then_the_next_call_is_never_sent(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    # $0.03 a day, each answer $0.007: a few answers, then a call that could pass it
    with _client(tmp_path, _limited(model_server, usd_per_day=0.03)) as client:
        _no_chores(client)
        key = api_chat(client)
        answered = 0
        while True:
            sent_before = len(model_server.requests)
            model_server.push(Reply(text=f"answer {answered}", usage=(1000, 500)))
            ended = api_turn(client, key, f"question {answered}")
            if ended["status"] != "complete":
                break
            answered += 1
            assert answered < 5, "the limit never held"
        assert len(model_server.requests) == sent_before  # the model server saw nothing
        spent = client.app.state.engine.spending  # type: ignore[attr-defined]
        today = spent.spent[(spending.period_start("day", time.time()), "all", "")]
    assert answered >= 2 and today == pytest.approx(answered * COST) and today <= 0.03
    assert ended["status"] == "error" and ended["ending"] == "spending_limit"
    sentence = ended["sentence"]
    assert (f"The daily spending limit overall ($0.03) is reached: {spending.usd(today)} "
            "spent today, and this call could cost up to $0.0") in sentence
    assert "It resets at 00:00 UTC on" in sentence and "[limits]" in sentence
    assert ("(reserved before it is sent: its input and an answer as long as the model's "
            "max output, 500 tokens; set a lower max output on the model") in sentence


def test_a_limit_below_what_is_spent_refuses_the_next_call_and_says_so_in_the_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    with _client(tmp_path, _limited(model_server)) as client:
        _no_chores(client)
        key = api_chat(client)
        model_server.push(Reply(text="paid answer", usage=(1000, 500)))
        assert api_turn(client, key, "first")["status"] == "complete"
        engine = client.app.state.engine  # type: ignore[attr-defined]
        lower = engine.base_config.model_copy(deep=True)
        lower.limits.usd_per_month = 0.001  # below the $0.007 spent
        engine.deps = replace(engine.deps, snapshot=engine.snapshot.adopt(lower))
        ended = api_turn(client, key, "second")
        chat = client.get(f"/api/sessions/{key}").json()
    assert ended["ending"] == "spending_limit"
    assert "monthly spending limit overall ($0.001) is reached: $0.007 spent this month" \
        in ended["sentence"]
    notices = [m["text"] for m in chat["messages"] if m["kind"] == "notice"]
    assert notices and "monthly spending limit" in notices[-1]


def test_an_unpriced_model_is_never_held_to_a_limit(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    with _client(tmp_path, _limited(model_server, usd_per_day=0.0)) as client:
        _no_chores(client)
        model_server.push(Reply(text="free answer", usage=(10, 5)), model="m-plain")
        ended = api_turn(client, api_chat(client, model="plain"), "hello")
        assert ended["status"] == "complete"
        key = api_chat(client)  # the priced model: a $0 limit refuses it before any call
        assert api_turn(client, key, "hello")["ending"] == "spending_limit"


def test_an_agents_limit_holds_its_chats_and_not_another_agents(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _limited(model_server, agents={"coder": {"usd_per_day": 0.0}})
    raw = config.model_dump()
    raw["agents"] = {"coder": {}, "writer": {}}
    with _client(tmp_path, Config.model_validate(raw)) as client:
        _no_chores(client)
        coder = api_turn(client, api_chat(client, agent="coder"), "hi")
        model_server.push(Reply(text="writer answers", usage=(10, 5)))
        writer = api_turn(client, api_chat(client, agent="writer"), "hi")
    assert coder["ending"] == "spending_limit"
    assert 'daily spending limit for the agent "coder" ($0.00)' in coder["sentence"]
    assert writer["status"] == "complete"


def test_the_tally_survives_a_restart(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _limited(model_server, usd_per_day=0.01)
    with _client(tmp_path, config) as client:
        _no_chores(client)
        model_server.push(Reply(text="paid", usage=(1000, 500)))
        assert api_turn(client, api_chat(client), "first")["status"] == "complete"
    with _client(tmp_path, config) as client:  # the same home: the record holds $0.007
        spent = client.app.state.engine.spending  # type: ignore[attr-defined]
        day = spending.period_start("day", time.time())
        assert spent.spent[(day, "all", "")] == pytest.approx(COST)
        assert spent.spent[(day, "agent", "default")] == pytest.approx(COST)
        ended = api_turn(client, api_chat(client), "second")
    assert ended["ending"] == "spending_limit"


def test_a_jobs_fire_over_its_limit_is_skipped_and_said_in_its_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = _limited(model_server, each_job={"usd_per_day": 0.0})
    with _client(tmp_path, config) as client:
        _no_chores(client)
        made = client.post("/api/jobs", json={"prompt": "report", "every_minutes": 60})
        assert made.status_code == 201, made.text
        job = made.json()
        engine = client.app.state.engine  # type: ignore[attr-defined]
        engine.spending.ended(None, Account(job=job["id"]), "priced", None)
        fired = client.portal.call(engine.scheduler.tick,  # type: ignore[attr-defined]
                                   time.time() + 3601)
        chat = client.get(f"/api/sessions/{job['session_key']}").json()
    assert fired and fired[0].run_id is None
    assert not model_server.requests
    notices = [m["text"] for m in chat["messages"] if m["kind"] == "notice"]
    assert notices and f"Job #{job['id']} did not run" in notices[-1]
    assert f"daily spending limit for job #{job['id']} ($0.00) is reached" in notices[-1]


def test_a_helper_a_jobs_turn_starts_spends_for_the_job(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Derived work inherits whom it spends for: before, a job's helpers were charged to no
    job, so a per-job limit did not hold them."""
    config = _limited(model_server, each_job={"usd_per_month": 5.0})
    model_server.default = Reply(text="done", usage=(1000, 500))
    with _client(tmp_path, config) as client:
        _no_chores(client)
        made = client.post("/api/jobs", json={"prompt": "report", "every_minutes": 60})
        assert made.status_code == 201, made.text
        job, key = made.json()["id"], made.json()["session_key"]
        first = client.post(f"/api/jobs/{job}/run").json()["run_id"]  # its chat is made
        until(lambda: client.get(f"/api/runs/{first}").json()["status"] == "complete",
              what="the first fire's turn")
        trusted = client.patch(f"/api/sessions/{key}", json={"trust": "trusted"})
        assert trusted.status_code == 200, trusted.text  # its helpers start without asking
        model_server.push(Reply(tool_calls=[Call("spawn_helpers", {"tasks": ["look it up"]})]))
        assert client.post(f"/api/jobs/{job}/run").status_code == 202
        until(lambda: _helper_calls(client), timeout=20, what="the helper's model call")
        helpers = _helper_calls(client)
    assert helpers and {row.job for row in helpers} == {job}


def _helper_calls(client: TestClient) -> list[Any]:
    """The model calls made in helper chats, as the per-call record has them."""
    with store_of(client).engine.connect() as conn:
        return list(conn.execute(
            select(model_calls).where(model_calls.c.session_key.in_(
                select(sessions.c.key).where(sessions.c.origin == "helper")))))


def test_the_reservation_is_the_most_a_call_can_cost_and_is_let_go_at_its_end() -> None:
    config = Config.model_validate({
        "models": [{"id": "p", "model": "m", "price_in_per_mtok": 3.0,
                    "price_out_per_mtok": 15.0, "max_output_tokens": 1000}],
        "limits": {"usd_per_day": 1.0}})
    book = Spending(lambda: config.limits, lambda model_id: config.models[0])
    request = ModelRequest(messages=[Message("user", "x" * 3000)], tools=[])
    hold = book.reserve("p", request)
    assert hold is not None
    assert hold.most == pytest.approx((1000 * 3.0 + 1000 * 15.0) / 1_000_000)
    day = spending.period_start("day", time.time())
    assert book.reserved[(day, "all", "")] == pytest.approx(hold.most)
    from hearth.models.types import Usage
    book.ended(hold, Account(), "p", Usage(tokens_in=1000, tokens_out=10))
    assert book.reserved[(day, "all", "")] == 0
    assert book.spent[(day, "all", "")] == pytest.approx((3000 + 150) / 1_000_000)


def test_a_merge_takes_the_larger_of_the_tally_and_the_record_for_each_account() -> None:
    """Another gateway's recorded calls raise the tally; the record missing this gateway's
    latest calls (not written yet) lowers nothing (tests/engine/test_replicas.py: two)."""
    config = Config.model_validate({"limits": {"usd_per_day": 1.0}})
    book = Spending(lambda: config.limits, lambda model_id: None)
    book.count(Account(agent="helper"), 0.010)  # this gateway's, not in the record yet
    day = spending.period_start("day", time.time())
    month = spending.period_start("month", time.time())
    book.merge([(day, "helper", None, None, 0.004)])  # the record: less than counted here
    assert book.spent[(day, "agent", "helper")] == pytest.approx(0.010)
    book.merge([(day, "helper", None, None, 0.004), (day, None, "bot", None, 0.020)])
    assert book.spent[(day, "all", "")] == pytest.approx(0.024)  # both, from the record
    assert book.spent[(month, "app", "bot")] == pytest.approx(0.020)
    assert book.spent[(day, "agent", "helper")] == pytest.approx(0.010)


def test_the_reset_is_the_next_utc_midnight_and_first_of_the_month() -> None:
    at = 1_798_761_599.0  # 2026-12-31 23:59:59 UTC
    assert spending.resets_at("day", at) == at + 1
    assert spending.resets_at("month", at) == at + 1
    assert spending.period_start("month", at) == "2026-12"
    cap = Cap("app", "bot", "month", 5.0)
    assert cap.label() == 'the monthly spending limit for the app "bot" ($5.00)'
