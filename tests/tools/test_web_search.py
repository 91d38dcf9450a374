"""web_search against a real-HTTP fake of SearXNG, Brave and Tavily (tests/fakes/search_server.py):
each provider asked in its own wire protocol, results as numbered title, URL and snippet; the
provider's loopback address reached as configured; a paid search on the Usage record and the
spending tally; a failure said without the key; a Temporary chat refused only when the owner
says so; bad arguments refused with a sentence. The tool alone, then in a real turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.config import Config, ConfigError, WebSearchConfig, load_config
from hearth.models.spending import Account
from hearth.store.schema import model_calls
from hearth.tools.base import ToolContext, ToolOutcome, ToolRefused
from hearth.tools.web_search import WebSearch
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.fakes.search_server import KEY, FakeSearch, Hit
from tests.support.dashboard import api_chat, api_turn, dashboard, store_of
from tests.support.models import priced_config

HITS = [Hit("Hearth <b>gateway</b>", "https://example.org/hearth", "A &amp; local agent"),
        Hit("Second", "https://example.org/2", "more"),
        Hit("Third", "https://example.org/3", "")]


@pytest.fixture
def search() -> Iterator[FakeSearch]:
    with FakeSearch() as fake:
        fake.results = list(HITS)
        yield fake


def _run(tool: WebSearch, tmp_path: Path, **args: Any) -> ToolOutcome:
    ctx = ToolContext(workspace=tmp_path, session_key="chat-1", run_id="run-1")
    return asyncio.run(tool.run(args, ctx))


def _config(provider: str, base_url: str, **more: Any) -> WebSearchConfig:
    return WebSearchConfig.model_validate({"provider": provider, "base_url": base_url,
                                           "api_key": KEY, **more})


def test_searxng_on_loopback_is_asked_its_json_and_answers_numbered_results(
        search: FakeSearch, tmp_path: Path) -> None:
    out = _run(WebSearch(_config("searxng", search.searxng_url)), tmp_path,
               query="  local   agent gateway ", max_results=2)
    [asked] = search.requests
    assert (asked.method, asked.path) == ("GET", "/search")
    assert asked.query == {"q": ["local agent gateway"], "format": ["json"]}
    assert out.ok and out.receipt == "Searched SearXNG: 2 results."
    assert out.output == ("Results for “local agent gateway”:\n"
                          "1. Hearth gateway\n   https://example.org/hearth\n   A & local agent\n"
                          "2. Second\n   https://example.org/2\n   more")


def test_brave_and_tavily_are_asked_with_their_keys(search: FakeSearch, tmp_path: Path) -> None:
    brave = _run(WebSearch(_config("brave", search.brave_url)), tmp_path, query="q1")
    tavily = _run(WebSearch(_config("tavily", search.tavily_url, max_results=1)), tmp_path,
                  query="q2", max_results=9)
    first, second = search.requests
    assert first.headers["x-subscription-token"] == KEY and first.query["count"] == ["5"]
    assert second.method == "POST" and second.headers["authorization"] == f"Bearer {KEY}"
    assert second.body == {"query": "q2", "max_results": 1}  # held to the config's max
    assert brave.output.count("https://example.org/") == 3
    assert tavily.output.count("https://example.org/") == 1


def test_a_failure_names_the_provider_and_status_never_the_key(
        search: FakeSearch, tmp_path: Path) -> None:
    wrong = WebSearchConfig.model_validate({"provider": "brave", "base_url": search.brave_url,
                                            "api_key": "wrong-key-abcdef123456"})
    out = _run(WebSearch(wrong), tmp_path, query="x")
    assert not out.ok
    assert out.output == ("The search on Brave Search failed: it answered HTTP 401 (check its "
                          "key). Nothing was found.")
    search.stop()
    gone = _run(WebSearch(_config("searxng", search.searxng_url)), tmp_path, query="x")
    assert "could not be reached" in gone.output and "127.0.0.1" not in gone.output


@pytest.mark.parametrize(("args", "said"), [
    ({}, "give the words to search for"), ({"query": "  "}, "give the words to search for"),
    ({"query": "x" * 401}, "at most 400 characters"),
    ({"query": "x", "max_results": 0}, "max_results must be a whole number"),
    ({"query": "x", "max_results": True}, "max_results must be a whole number"),
])
def test_bad_arguments_are_refused_with_a_sentence(
        search: FakeSearch, tmp_path: Path, args: dict[str, Any], said: str) -> None:
    with pytest.raises(ToolRefused, match=said):
        _run(WebSearch(_config("searxng", search.searxng_url)), tmp_path, **args)
    assert not search.requests


def test_the_config_wants_an_address_for_searxng(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[web_search]\nprovider = "searxng"\n')
    with pytest.raises(ConfigError, match="SearXNG provider needs its base_url"):
        load_config(path, environ={})
    path.write_text('[web_search]\nprovider = "brave"\napi_key_env = "BRAVE_KEY"\n')
    found = load_config(path, environ={}).web_search
    assert found is not None and found.address.startswith("https://api.search.brave.com/")


def _turn_config(server: ScriptedModelServer, search: FakeSearch, **more: Any) -> Config:
    raw = priced_config(server).model_dump()
    raw["web_search"] = {"provider": "searxng", "base_url": search.searxng_url, **more}
    raw["learning"] = {"every_turns": 1000}
    return Config.model_validate(raw)


def _search_turn(client: Any, server: ScriptedModelServer, key: str) -> dict[str, Any]:
    server.push(Reply(tool_calls=[Call("web_search", {"query": "hearth gateway"})]),
                Reply(text="Found it."))
    engine = client.app.state.engine
    engine.deps = replace(engine.deps, after_turn=lambda run, session: None)
    return api_turn(client, key, "search the web")


def test_in_a_turn_a_search_is_a_read_and_a_paid_one_is_on_the_record(
        tmp_path: Path, model_server: ScriptedModelServer, search: FakeSearch) -> None:
    config = _turn_config(model_server, search, usd_per_search=0.004)
    with dashboard(tmp_path / "home", config, csrf=True) as client:
        key = api_chat(client)
        ended = _search_turn(client, model_server, key)
        assert ended["status"] == "complete"  # no approval asked: a search changes nothing
        tool_result = [m for m in model_server.requests[-1].messages if m["role"] == "tool"]
        assert "1. Hearth gateway" in tool_result[0]["content"]
        with store_of(client).read() as conn:
            rows = [dict(r._mapping) for r in conn.execute(
                select(model_calls).where(model_calls.c.purpose == "web_search"))]
        spent = client.app.state.engine.spending  # type: ignore[attr-defined]
        assert sum(spent.spent[k] for k in spent.spent if k[1:] == ("all", "")) > 0.004
    [row] = rows
    assert (row["provider"], row["model_id"], row["cost_usd"]) == ("searxng", "searxng", 0.004)
    assert row["session_key"] == key and row["agent"] == "default"


def test_a_temporary_chat_searches_unless_the_owner_says_no(
        tmp_path: Path, model_server: ScriptedModelServer, search: FakeSearch) -> None:
    config = _turn_config(model_server, search, temporary=False)
    with dashboard(tmp_path / "home", config, csrf=True) as client:
        key = api_chat(client, memory_mode="temporary")
        assert _search_turn(client, model_server, key)["status"] == "complete"
        tool_result = [m for m in model_server.requests[-1].messages if m["role"] == "tool"]
        kept = api_chat(client)
        assert _search_turn(client, model_server, kept)["status"] == "complete"
    assert "web searches are off in Temporary chats" in tool_result[0]["content"]
    assert [r.query["q"] for r in search.requests] == [["hearth gateway"]]  # the kept chat's


def test_a_paid_search_is_not_made_once_a_spending_limit_is_reached(
        tmp_path: Path, model_server: ScriptedModelServer, search: FakeSearch) -> None:
    config = _turn_config(model_server, search, usd_per_search=0.004)
    raw = config.model_dump()
    raw["limits"]["usd_per_day"] = 0.001  # below one search
    with dashboard(tmp_path / "home", Config.model_validate(raw), csrf=True) as client:
        engine = client.app.state.engine  # type: ignore[attr-defined]
        engine.spending.count(Account(), 0.002)  # spent today already: past the limit
        key = api_chat(client, model="plain")  # an unpriced model: the turn itself is free
        ended = _search_turn(client, model_server, key)
        tool_result = [m for m in model_server.requests[-1].messages if m["role"] == "tool"]
    assert ended["status"] == "complete"
    assert tool_result[0]["content"].startswith("Refused: a search on SearXNG costs money, and "
                                                "the daily spending limit overall ($0.001)")
    assert not search.requests
