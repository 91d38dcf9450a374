"""The Usage page and the usage totals behind it: every model call of a turn is a row of the
per-call record, added up per UTC day and model (at the model's price, or counted unpriced),
Incognito and Temporary chats included without any chat or text in the row; the page draws
tokens per day as inline SVG and tables per model, purpose, provider and day with the same
numbers. In-process, real turns against the scripted model server."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from hearth.config import Config
from hearth.home import Home
from hearth.store import usage as usage_store
from hearth.store.db import now
from hearth.store.model_calls import CallRow, insert_call
from hearth.store.schema import model_calls
from hearth.web.app import create_app
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.dashboard import (
    INLINE_SCRIPT,
    api_chat,
    api_turn,
    dashboard,
    main_of,
    store_of,
)
from tests.support.models import priced_config
from tests.support.store import migrated

DAY = 86_400


@pytest.fixture
def client(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[TestClient]:
    with dashboard(tmp_path / "home", priced_config(model_server), csrf=True) as test_client:
        engine = test_client.app.state.engine  # type: ignore[attr-defined]
        # the figures here are the turns' own: no chore (a title, learning) runs after them
        engine.deps = replace(engine.deps, after_turn=lambda run, session: None)
        yield test_client


def _rows(client: TestClient) -> list[dict[str, Any]]:
    with store_of(client).read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(model_calls))]


def _call(conn: Any, model_id: str, tokens_in: int, tokens_out: int, cost: float | None,
          at: float) -> None:
    insert_call(conn, CallRow(created_at=at, model_id=model_id, provider="openai",
                              purpose="turn", outcome="ok", tokens_in=tokens_in,
                              tokens_out=tokens_out, cost_usd=cost, duration_ms=5,
                              session_key=None))


def _model_row(page: str, model_id: str) -> list[str]:
    """The cells of the By model table's row for `model_id`."""
    table = page.split("<caption>By model</caption>", 1)[1].split("</table>", 1)[0]
    row = re.search(rf'<th scope="row">{re.escape(model_id)}</th>(.*?)</tr>', table, re.S)
    assert row is not None, f"no row for {model_id}"
    return [re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]


def test_a_priced_models_turns_add_up_in_the_store_and_on_the_page(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="first answer", usage=(1000, 500)),
                      Reply(text="second answer", usage=(200, 100)))
    key = api_chat(client)
    assert api_turn(client, key, "one")["status"] == "complete"
    assert api_turn(client, key, "two")["status"] == "complete"
    with store_of(client).read() as conn:
        [total] = usage_store.by_model(conn, usage_store.day_of(now()))
    assert (total.key, total.calls, total.tokens_in, total.tokens_out) == ("priced", 2, 1200, 600)
    assert total.cost_usd == pytest.approx((1200 * 2.0 + 600 * 10.0) / 1_000_000)
    assert total.unpriced_calls == 0
    page = client.get("/usage")
    assert page.status_code == 200 and 'href="/usage" aria-current="page"' in page.text
    assert _model_row(page.text, "priced") == ["2", "1,200", "600", "$0.0084"]
    assert "unpriced" not in page.text.split("<caption>By model</caption>", 1)[1]


def test_a_model_without_prices_shows_unpriced_never_free(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="plain answer", usage=(40, 7)), model="m-plain")
    key = api_chat(client, model="plain")
    assert api_turn(client, key, "hello")["status"] == "complete"
    [row] = _rows(client)
    assert row["model_id"] == "plain" and row["cost_usd"] is None
    assert (row["calls"], row["tokens_in"], row["tokens_out"]) == (1, 40, 7)
    page = client.get("/usage").text
    assert _model_row(page, "plain") == ["1", "40", "7", "unpriced"]
    assert "$0" not in page


def test_two_models_on_two_days_both_appear_and_older_days_do_not(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="today", usage=(300, 30)))
    assert api_turn(client, api_chat(client), "hi")["status"] == "complete"
    yesterday = now() - DAY
    with store_of(client).write() as conn:
        _call(conn, "plain", 50, 5, None, yesterday)
        _call(conn, "ancient", 9, 9, 18 / 1_000_000, now() - 40 * DAY)
    page = client.get("/usage").text
    assert _model_row(page, "priced")[:3] == ["1", "300", "30"]
    assert _model_row(page, "plain") == ["1", "50", "5", "unpriced"]
    assert "ancient" not in page
    today_day, yesterday_day = usage_store.day_of(now()), usage_store.day_of(yesterday)
    days = page.split("<caption>By day", 1)[1]
    assert days.index(today_day) < days.index(yesterday_day)  # newest first
    # the chart: one bar slot per day of the last 30, each saying its numbers
    assert page.count('<g class="day">') == 30
    assert f"<title>{yesterday_day}: 50 tokens in, 5 out</title>" in page
    assert f"<title>{today_day}: 300 tokens in, 30 out</title>" in page
    # the per-model chart: a bar each, to one scale, with its tokens and cost
    models = page.split('<g class="model">')[1:]
    assert len(models) == 2 and "330 tokens, $0.0009" in models[0]
    assert "55 tokens, unpriced" in models[1]
    widths = [float(m.split('width="', 1)[1].split('"', 1)[0]) for m in models]
    assert widths[0] == pytest.approx(widths[1] * 6)
    # all models together: 1 priced call + 1 unpriced
    assert "$0.0009 + 1 unpriced call" in page
    assert "ancient" in client.get("/usage", params={"days": 60}).text


def test_an_incognito_or_temporary_turn_is_counted_with_no_chat_or_text(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    for mode in ("incognito", "temporary"):
        model_server.push(Reply(text=f"secret reply {mode}", usage=(11, 3)))
        key = api_chat(client, memory_mode=mode)
        assert api_turn(client, key, f"my secret {mode} passphrase")["status"] == "complete"
        row = _rows(client)[-1]
        values = " ".join(str(v) for v in row.values())
        assert key not in values and "secret" not in values and "passphrase" not in values
        assert row["session_key"] is None
    rows = _rows(client)
    assert [(r["calls"], r["tokens_in"], r["tokens_out"]) for r in rows] == [(1, 11, 3)] * 2


def test_a_failed_usage_write_never_ends_theapi_turn(
        client: TestClient, model_server: ScriptedModelServer,
        caplog: pytest.LogCaptureFixture) -> None:
    with store_of(client).write() as conn:
        conn.execute(text("DROP TABLE model_calls"))
    model_server.push(Reply(text="still answered", usage=(5, 5)))
    ended = api_turn(client, api_chat(client), "the private words")
    assert ended["status"] == "complete"
    deadline = time.monotonic() + 5
    while not [r for r in caplog.records if r.name == "hearth.models.calls"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    logged = [r.getMessage() for r in caplog.records if r.name == "hearth.models.calls"]
    assert logged and "not recorded" in logged[0]
    assert "private words" not in " ".join(logged) and "still answered" not in " ".join(logged)


def test_the_chart_is_inline_svg_with_a_name_and_no_inline_style(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    empty = main_of(client.get("/usage").text)
    assert "No model calls in the last 30 days" in empty and "<svg" not in empty
    model_server.push(Reply(text="x", usage=(100, 50)))
    assert api_turn(client, api_chat(client), "hi")["status"] == "complete"
    whole = client.get("/usage", params={"days": 7}).text
    page = main_of(whole)
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert 'role="img"' in svg and 'aria-label="Tokens per day from ' in svg
    assert "<title>Tokens per day from " in svg and "150 tokens" in svg
    assert svg.count('<g class="day">') == 7
    assert 'class="bar-in"' in svg and 'class="bar-out"' in svg
    assert "style=" not in whole and not INLINE_SCRIPT.search(whole)


@pytest.mark.parametrize("days", ["0", "367", "-1", "abc"])
def test_a_bad_span_is_the_error_envelope(client: TestClient, days: str) -> None:
    answer = client.get("/usage", params={"days": days})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_request"


def test_the_page_needs_sign_in(tmp_path: Path) -> None:
    with dashboard(tmp_path / "other") as anonymous:
        answer = anonymous.get("/usage")
    assert answer.status_code == 303 and answer.headers["location"] == "/login"


def test_the_totals_add_up_a_day_and_keep_priced_and_unpriced_apart(tmp_path: Path) -> None:
    db = migrated(tmp_path, "u.db")
    noon = 1_764_936_000.0  # 2025-12-05 12:00 UTC
    with db.write() as conn:
        _call(conn, "m", 100, 10, None, noon)
        _call(conn, "m", 1_000_000, 0, None, noon + 60)
        [unpriced] = usage_store.by_day(conn, "2025-12-05")
        _call(conn, "m", 1_000_000, 500_000, 5.0, noon + 120)
        _call(conn, "m", 1, 1, 7 / 1_000_000, noon + DAY)
        days = usage_store.by_day(conn, "2025-12-05")
        later = usage_store.by_model(conn, "2025-12-06")
    db.close()
    assert unpriced.cost_usd is None and unpriced.unpriced_calls == 2
    assert [d.key for d in days] == ["2025-12-05", "2025-12-06"]
    first = days[0]
    assert (first.calls, first.tokens_in, first.tokens_out) == (3, 2_000_100, 500_010)
    assert first.cost_usd == pytest.approx(5.0) and first.unpriced_calls == 2
    assert [(t.key, t.calls) for t in later] == [("m", 1)]
    assert usage_store.cost_of(1_000_000, 0, 3.0, None) is None  # one price is no price


def test_the_usage_api_answers_the_pages_numbers_as_json(tmp_path: Path) -> None:
    app = create_app(Home(tmp_path / "home"), Config())
    with TestClient(app) as client:
        with app.state.engine.db.write() as conn:
            _call(conn, "m1", 1000, 500, 0.004, time.time())
        headers = {"Authorization": f"Bearer {app.state.token}"}
        body = client.get("/api/usage", headers=headers).json()
        assert body["models"][0]["model_id"] == "m1" and body["models"][0]["tokens_in"] == 1000
        assert body["models"][0]["cost_usd"] == pytest.approx(0.004)
        assert len(body["days"]) == 1 and "day" in body["days"][0]
        assert [p["purpose"] for p in body["purposes"]] == ["turn"]
        assert [p["provider"] for p in body["providers"]] == ["openai"]
        assert client.get("/api/usage", params={"days": 0}, headers=headers).status_code == 422
        assert client.get("/api/usage").status_code == 401
