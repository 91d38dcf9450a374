"""The spending limits on the dashboard: the Settings page's Spending section saves them
(kept in settings.json, held to from the next call), refuses a bad amount with a sentence, and
says which models no limit holds; the Usage page shows each limit with what was spent against
it and draws the cost per day against the daily limit (inline SVG, no inline style)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fastapi.testclient import TestClient

from hearth.config import Config
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.dashboard import INLINE_SCRIPT, api_chat, api_turn, dashboard, main_of
from tests.support.models import priced_config


def _quiet(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    engine.deps = replace(engine.deps, after_turn=lambda run, session: None)


def test_the_settings_form_saves_limits_that_the_next_call_holds_to(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    with dashboard(tmp_path / "home", priced_config(model_server), csrf=True) as client:
        _quiet(client)
        page = main_of(client.get("/settings").text)
        assert 'id="spending"' in page and 'id="unpriced-models"' in page
        assert "Unlimited: plain has no price" in page
        saved = client.post("/settings/limits", data={
            "csrf": client.headers["X-CSRF-Token"], "all:day": "0", "all:month": "",
            "agent:default:month": "$2.50", "job:day": "0.10"})
        assert saved.status_code == 303 and saved.headers["location"].endswith("#spending")
        kept = json.loads((tmp_path / "home" / "settings.json").read_text())["limits"]
        assert kept["usd_per_day"] == 0.0 and kept["agents"] == {"default": {"usd_per_month": 2.5}}
        assert kept["each_job"] == {"usd_per_day": 0.1}
        ended = api_turn(client, api_chat(client), "hello")
        assert ended["ending"] == "spending_limit"  # $0 a day: the next call is refused
        assert not model_server.requests
        shown = main_of(client.get("/settings?saved=limits").text)
        assert "The spending limits are saved" in shown
        assert 'name="agent:default:month"' in shown and 'value="2.5"' in shown
        bad = client.post("/settings/limits", data={
            "csrf": client.headers["X-CSRF-Token"], "all:day": "lots"})
        assert bad.status_code == 422
        assert "The daily limit overall must be an amount in US dollars" in bad.text
        still = json.loads((tmp_path / "home" / "settings.json").read_text())["limits"]
        assert still == kept  # a refused form changes nothing


def test_the_usage_page_shows_each_limit_and_the_cost_per_day_against_it(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    raw = priced_config(model_server).model_dump()
    raw["limits"].update({"usd_per_day": 0.05, "agents": {"default": {"usd_per_month": 1}}})
    raw["models"][0]["max_output_tokens"] = 500  # a call reserves its input and $0.005 more
    with dashboard(tmp_path / "home", Config.model_validate(raw), csrf=True) as client:
        _quiet(client)
        empty = main_of(client.get("/usage").text)
        assert "Everything · today" in empty and "$0.00 of $0.05" in empty
        assert "cost-chart" not in empty  # nothing priced spent yet: no chart
        model_server.push(Reply(text="an answer", usage=(1000, 500)))
        assert api_turn(client, api_chat(client), "hi")["status"] == "complete"
        whole = client.get("/usage").text
    page = main_of(whole)
    assert "$0.007 of $0.05" in page and "Agent default · this month" in page
    assert "$0.007 of $1.00" in page
    chart = page.split('class="usage-chart cost-chart"', 1)[1].split("</svg>", 1)[0]
    assert 'class="limit-line"' in chart and "daily limit $0.05" in chart
    assert chart.count('class="bar-cost"') == 1
    assert "style=" not in whole and not INLINE_SCRIPT.search(whole)
