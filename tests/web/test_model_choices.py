"""Every surface reads "which models" from one place, the engine's snapshot's `choices()`:
the start page, a chat's page, the Settings page (its table and its chain), /healthz and
/v1/models list the same models after a Settings save; a model its breaker paused stays
paused across the save; the Settings page reads settings.json off the event loop.
In-process (Starlette's TestClient) against the scripted model server over loopback."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hearth import settings
from hearth.config import load_config
from hearth.engine.runtime import Engine
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import write_config
from tests.support.dashboard import bearer, dashboard, sign_in


def _engine(client: TestClient) -> Engine:
    engine: Engine = client.app.state.engine  # type: ignore[attr-defined]
    return engine


def _options(page: str, select_id: str) -> list[str]:
    """The values of a `<select>`'s options, the empty one (the chat chain) left out."""
    found = re.search(rf'<select id="{select_id}"[^>]*>(.*?)</select>', page, re.S)
    assert found, f"the page has no {select_id}"
    return [v for v in re.findall(r'<option value="([^"]*)"', found.group(1)) if v]


def _add_model(client: TestClient, csrf: str, url: str) -> None:
    added = client.post("/settings/models", data={
        "kind": "openai", "id": "more", "model": "more-model", "base_url": url,
        "api_key": "sk-more", "csrf": csrf})
    assert added.status_code == 303, added.text


def test_every_surface_lists_the_models_of_choices(
        home: Path, model_server: ScriptedModelServer) -> None:
    """Before: the start and chat pages and /healthz read the registry (`deps.models.ids()`),
    /v1/models and a chat's pick `Engine.choices()`, Settings its config and its registry."""
    write_config(home, model_server.openai_base_url)
    with dashboard(home, load_config(home / "config.toml")) as client:
        csrf = sign_in(client)
        _add_model(client, csrf, model_server.openai_base_url)
        saved = client.post("/settings/agents", data={"csrf": csrf, "name": "helper",
                                                      "system_prompt": "", "profile": "minimal"})
        assert saved.status_code == 303, saved.text
        choices = _engine(client).choices()
        assert choices.models == ("fake", "more") and "helper" in choices.agents
        models = list(choices.models)

        start = client.get("/").text
        assert _options(start, "start-model") == models
        key = client.post("/api/sessions", json={}, headers=bearer(client)).json()["key"]
        chat = client.get(f"/chats/{key}").text
        assert _options(chat, "chat-model") == models
        assert _options(chat, "chat-agent") == _options(start, "start-agent") \
            == list(choices.agents)
        shown = client.get("/settings").text
        assert re.findall(r'<td data-label="Id">([^<]*)</td>', shown) == models
        health = client.get("/healthz").json()
        assert health["models"] == models and list(health["breakers"]) == models
        listed = client.get("/v1/models", headers=bearer(client)).json()
        assert [m["id"] for m in listed["data"]] == ["hearth", "helper", *models]
        # a model added on Settings joins the chat chain only when asked (it was not)
        assert _engine(client).snapshot.models.chat_chain == ["fake"]


def test_a_model_paused_by_its_breaker_stays_paused_after_a_settings_save(
        home: Path, model_server: ScriptedModelServer) -> None:
    write_config(home, model_server.openai_base_url)
    with dashboard(home, load_config(home / "config.toml")) as client:
        csrf = sign_in(client)
        breakers = _engine(client).snapshot.models.breakers
        for _ in range(3):  # failures in a row open it
            breakers.failed("fake")
        saved = client.post("/settings/name", data={"csrf": csrf, "user_name": "Ana"})
        assert saved.status_code == 303, saved.text
        assert _engine(client).config.agent.user_name == "Ana"  # a new snapshot
        assert client.get("/healthz").json()["breakers"]["fake"]["state"] == "open"
        health = re.findall(r'class="model-health">([^<]*)<', client.get("/settings").text)
        assert len(health) == 1 and health[0].startswith("skipped since")


def test_the_settings_page_reads_settings_json_off_the_event_loop(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop: list[str] = []
    for name in ("load", "update"):
        real = getattr(settings, name)

        def noted(*args: object, _real: object = real, _name: str = name) -> object:
            try:
                asyncio.get_running_loop()
                on_loop.append(_name)
            except RuntimeError:
                pass
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(settings, name, noted)
    with dashboard(home) as client:
        csrf = sign_in(client)
        assert client.get("/settings").status_code == 200
        assert client.post("/settings/name", data={"csrf": csrf,
                                                   "user_name": "Ana"}).status_code == 303
    assert on_loop == []
