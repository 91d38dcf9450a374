"""The dashboard's Settings page: models added, tested with a real call and picked as the chat
chain take effect for the next message without a restart; settings.json is 0600 and survives a
restart; bad forms answer a sentence, never a 500; an API key is never shown, logged or audited;
your name reaches the system prompt; the first-run line leads to the add-a-model form.
In-process (Starlette's TestClient) against the scripted model server over loopback."""

from __future__ import annotations

import json
import logging
import re
import stat
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hearth.config import Config, ModelConfig, load_config
from hearth.models.registry import ModelRegistry
from hearth.store.schema import audit
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.dashboard import INLINE_SCRIPT, dashboard, sign_in

KEY = "sk-test-0123456789abcdefSECRET"


def _client(home: Path) -> AbstractContextManager[TestClient]:
    """The dashboard on `home` as `hearth gateway` starts it: with the home's config.toml."""
    return dashboard(home, load_config(home / "config.toml"))


@pytest.fixture
def client(home: Path) -> Iterator[TestClient]:
    with _client(home) as test_client:
        yield test_client



def _add(client: TestClient, csrf: str, **fields: str) -> Any:
    form = {"kind": "openai", "id": "fake", "model": "fake-model", "csrf": csrf, **fields}
    return client.post("/settings/models", data=form)


def _models(client: TestClient) -> Any:
    return client.app.state.engine.snapshot.models  # type: ignore[attr-defined]


def _chat(client: TestClient, csrf: str, text: str) -> tuple[dict[str, Any], str]:
    """Send `text` in a new chat; the run's ending and the answer's text."""
    headers = {"X-CSRF-Token": csrf}
    key = client.post("/api/sessions", json={}, headers=headers).json()["key"]
    sent = client.post(f"/api/sessions/{key}/messages", json={"text": text}, headers=headers)
    assert sent.status_code == 202
    run = client.get(f"/api/runs/{sent.json()['run_id']}/wait", params={"timeout": 20}).json()
    answers = [m["text"] for m in client.get(f"/api/sessions/{key}").json()["messages"]
               if m["kind"] == "assistant"]
    return run, " ".join(answers)


def _status_line(page: str) -> str:
    """The Test's outcome sentence shown on the page."""
    found = re.search(r'class="notice test-(?:ok|failed)" role="status">([^<]*)</p>', page)
    assert found, "the page shows no Test outcome"
    return found.group(1)


def test_an_openai_compatible_model_is_tested_picked_and_answers_without_a_restart(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    assert _models(client).ids() == []
    added = _add(client, csrf, base_url=model_server.openai_base_url, api_key=KEY)
    assert added.status_code == 303 and added.headers["location"].startswith("/settings?saved=")
    page = client.get("/settings").text
    assert "fake-model" in page and "key set" in page and "added here" in page

    model_server.push(Reply(text="OK"))
    tested = client.post("/settings/models/fake/test", data={"csrf": csrf})
    assert tested.status_code == 200
    assert _status_line(tested.text).startswith("fake answered “OK”")
    call = model_server.calls("/v1/chat/completions")[-1]
    assert call.stream and call.model == "fake-model"
    assert call.messages[-1]["content"] == "Reply with the word OK."
    assert call.headers["authorization"] == f"Bearer {KEY}"  # the key given is the key used

    picked = client.post("/settings/chain", data={"chain_1": "fake", "csrf": csrf})
    assert picked.status_code == 303 and _models(client).chat_chain == ["fake"]
    model_server.push(Reply(text="Hello from the added model."))
    run, answer = _chat(client, csrf, "hello")
    assert run["status"] == "complete", run
    assert answer == "Hello from the added model."
    assert "No model is set up" not in client.get("/").text


def test_an_anthropic_model_is_added_tested_and_answers(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    added = _add(client, csrf, kind="anthropic", id="claude", model="claude-fake",
                 base_url=model_server.anthropic_base_url, api_key=KEY)
    assert added.status_code == 303
    model_server.push(Reply(text="OK"))
    tested = client.post("/settings/models/claude/test", data={"csrf": csrf})
    assert _status_line(tested.text).startswith("claude answered “OK”")
    call = model_server.calls("/v1/messages")[-1]
    given = (call.headers.get("x-api-key"),
             call.headers.get("authorization", "").removeprefix("Bearer "))
    assert call.stream and KEY in given  # the SDK sends it one way or the other
    assert "Anthropic" in client.get("/settings").text
    model_server.push(Reply(text="Bonjour from Claude."))
    run, answer = _chat(client, csrf, "hello")
    assert run["status"] == "complete", run
    assert answer == "Bonjour from Claude."
    assert len(model_server.calls("/v1/messages")) == 2


def test_an_ollama_model_gets_its_default_url_and_a_dummy_key(client: TestClient) -> None:
    csrf = sign_in(client)
    assert _add(client, csrf, kind="ollama", id="llama", model="llama3.1").status_code == 303
    model = _models(client).config_of("llama")
    assert model.base_url == "http://127.0.0.1:11434/v1" and model.api_key == "ollama"
    assert "Ollama" in client.get("/settings").text


@pytest.mark.parametrize(("fields", "sentence"), [
    ({"base_url": "ftp://example.com/v1"}, "base_url must start with http:// or https://"),
    ({"base_url": "localhost:11434/v1"}, "base_url must start with http:// or https://"),
    ({"base_url": "not a url"}, "base_url must start with http:// or https://"),
    ({"base_url": "http://:99999"}, "base_url must be one web address with a host"),
    ({"id": "bad id!"}, "A model&#39;s id is 1 to 64 letters"),
    ({"id": "x" * 65}, "A model&#39;s id is 1 to 64 letters"),
    ({"model": ""}, "Give the model&#39;s name"),
    ({"kind": "gemini"}, "Pick the model&#39;s provider"),
    ({"price_in": "-1"}, "The input price is US dollars per million tokens"),
    ({"price_out": "lots"}, "The output price is US dollars per million tokens"),
    ({"api_key_env": "BAD-NAME"}, "variable name is letters, digits"),
    ({"api_key": KEY, "api_key_env": "OPENAI_API_KEY"}, "not both"),
])
def test_a_bad_model_form_answers_a_sentence_and_changes_nothing(
        client: TestClient, home: Path, fields: dict[str, str], sentence: str) -> None:
    csrf = sign_in(client)
    answer = _add(client, csrf, **fields)
    assert answer.status_code == 422 and sentence in answer.text
    assert 'role="alert"' in answer.text and KEY not in answer.text
    assert _models(client).ids() == [] and not (home / "settings.json").exists()


def test_a_duplicate_id_and_other_bad_forms_are_refused_with_a_sentence(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    assert _add(client, csrf, base_url=model_server.openai_base_url).status_code == 303
    again = _add(client, csrf, base_url=model_server.openai_base_url, model="other")
    assert again.status_code == 422 and "There is already a model called fake" in again.text
    assert _models(client).config_of("fake").model == "fake-model"
    for path, form, sentence in (
        ("/settings/chain", {"chain_1": "nope"}, "is not a model set up here"),
        ("/settings/agents", {"name": "no spaces", "system_prompt": "x"}, "An agent&#39;s name"),
        ("/settings/agents", {"name": "a", "profile": "root"}, "Pick the agent&#39;s tools"),
        ("/settings/name", {"user_name": "x" * 81}, "Your name is one line"),
        ("/settings/models/nope/remove", {}, "There is no model called nope"),
    ):
        answer = client.post(path, data={**form, "csrf": csrf})
        assert answer.status_code == 422 and sentence in answer.text, path
    missing = client.post("/settings/models/nope/test", data={"csrf": csrf})
    assert missing.status_code == 404 and "There is no model called nope" in missing.text
    assert client.post("/settings/models", data={"id": "x"}).status_code == 403  # no CSRF


def test_settings_are_kept_0600_survive_a_restart_and_never_rewrite_config_toml(
        home: Path, model_server: ScriptedModelServer) -> None:
    home.mkdir(parents=True)
    toml = (f'[[models]]\nid = "local"\nbase_url = "{model_server.openai_base_url}"\n'
            'model = "toml-model"\n')
    (home / "config.toml").write_text(toml)
    with _client(home) as client:
        csrf = sign_in(client)
        clash = _add(client, csrf, id="local", base_url=model_server.openai_base_url)
        assert clash.status_code == 422 and "already a model called local" in clash.text
        assert _add(client, csrf, base_url=model_server.openai_base_url,
                    api_key=KEY).status_code == 303
        assert client.post("/settings/chain", data={"chain_1": "fake", "chain_2": "local",
                                                    "csrf": csrf}).status_code == 303
        assert client.post("/settings/name", data={"user_name": "Ada",
                                                   "csrf": csrf}).status_code == 303
        assert client.post("/settings/agents", data={"name": "coder", "profile": "minimal",
                                                     "system_prompt": "Be terse.",
                                                     "csrf": csrf}).status_code == 303
        refused = client.post("/settings/models/local/remove", data={"csrf": csrf})
        assert refused.status_code == 422 and "config.toml" in refused.text
    kept = home / "settings.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["models"][0]["api_key"] == KEY
    assert (home / "config.toml").read_text() == toml
    assert not list(home.glob(".settings.json.*"))  # no temporary file left behind
    with _client(home) as restarted:
        models = _models(restarted)
        assert models.ids() == ["local", "fake"] and models.chat_chain == ["fake", "local"]
        config = restarted.app.state.engine.config  # type: ignore[attr-defined]
        assert config.agent.user_name == "Ada"
        assert config.agents["coder"].tools.profile == "minimal"
        csrf = sign_in(restarted)
        page = restarted.get("/settings").text
        assert 'value="Ada"' in page and "Be terse." in page
        model_server.push(Reply(text="Still here after a restart."))
        run, answer = _chat(restarted, csrf, "hi")
        assert answer == "Still here after a restart.", run
        assert model_server.calls()[-1].model == "fake-model"


def test_removing_an_added_model_takes_it_out_of_the_chain_and_the_file(
        client: TestClient, home: Path, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    for model_id in ("one", "two"):
        _add(client, csrf, id=model_id, base_url=model_server.openai_base_url)
    client.post("/settings/chain", data={"chain_1": "two", "chain_2": "one", "csrf": csrf})
    removed = client.post("/settings/models/two/remove", data={"csrf": csrf})
    assert removed.status_code == 303
    assert _models(client).ids() == ["one"] and _models(client).chat_chain == ["one"]
    kept = json.loads((home / "settings.json").read_text())
    assert [m["id"] for m in kept["models"]] == ["one"] and kept["chat_chain"] == ["one"]


class _EchoesTheKey(BaseHTTPRequestHandler):
    """A provider that refuses the key and says it back, as real providers' 401s do."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}.",
                                     "type": "invalid_request_error", "code": "invalid_api_key"}})
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST  # noqa: N815 - its model list (GET /models) refuses the key alike

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def echoing_provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoesTheKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_key_is_never_shown_logged_or_audited(
        client: TestClient, echoing_provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    csrf = sign_in(client)
    assert _add(client, csrf, id="leaky", base_url=echoing_provider,
                api_key=KEY).status_code == 303
    page = client.get("/settings").text
    assert KEY not in page and "key set" in page
    tested = client.post("/settings/models/leaky/test", data={"csrf": csrf})
    sentence = _status_line(tested.text)
    assert sentence.startswith("leaky did not answer") and "401" in sentence
    assert "Incorrect API key provided: [redacted]" in sentence  # the provider said it; masked
    assert KEY not in tested.text and KEY[:12] not in tested.text
    engine = client.app.state.engine  # type: ignore[attr-defined]
    with engine.db.read() as conn:
        rows = conn.execute(audit.select().where(audit.c.action == "settings.changed")).all()
    assert rows and all(KEY not in json.dumps(row.detail) for row in rows)
    assert KEY not in caplog.text
    assert "never shown again" in page and 'type="password"' in page


def test_a_key_from_the_environment_is_named_not_shown(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PROVIDER_KEY", KEY)
    csrf = sign_in(client)
    assert _add(client, csrf, api_key_env="$MY_PROVIDER_KEY").status_code == 303
    page = client.get("/settings").text
    assert "key from $MY_PROVIDER_KEY" in page and KEY not in page


def test_your_name_and_the_agents_prompt_reach_the_system_prompt(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    _add(client, csrf, base_url=model_server.openai_base_url)
    saved = client.post("/settings/name", data={"user_name": "  Ada   Lovelace ", "csrf": csrf})
    assert saved.status_code == 303
    model_server.push(Reply(text="Hi Ada."))
    _chat(client, csrf, "who am I?")
    system = model_server.calls("/v1/chat/completions")[-1].messages[0]
    assert system["role"] == "system" and "The owner's name is Ada Lovelace." in system["content"]
    assert client.post("/settings/agents", data={"name": "default", "csrf": csrf,
                                                 "system_prompt": "You are a pirate."}
                       ).status_code == 303
    model_server.push(Reply(text="Arr."))
    _chat(client, csrf, "hello")
    system = model_server.calls("/v1/chat/completions")[-1].messages[0]
    assert system["content"].startswith("You are a pirate.")
    assert "Ada Lovelace" in system["content"]


def test_the_first_run_line_leads_to_the_add_a_model_form(client: TestClient) -> None:
    sign_in(client)
    listing = client.get("/").text
    assert "No model is set up" in listing and 'href="/settings#add-model"' in listing
    page = client.get("/settings")
    assert page.status_code == 200 and 'id="add-model"' in page.text
    assert 'aria-current="page"' in page.text.split('href="/settings"', 1)[1][:40]
    for provider in ("OpenAI-compatible", "Anthropic", "Ollama"):
        assert provider in page.text
    assert "style=" not in page.text  # the CSP allows no inline style, nor inline script:
    assert not INLINE_SCRIPT.search(page.text)


def test_an_unreadable_settings_file_is_said_and_never_overwritten(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "settings.json").write_text("{not json")
    with _client(home) as client:
        csrf = sign_in(client)
        page = client.get("/settings").text
        assert "settings.json is not valid" in page and "fix or remove it" in page
        refused = client.post("/settings/name", data={"user_name": "Ada", "csrf": csrf})
        assert refused.status_code == 422 and "fix or remove it" in refused.text
    assert (home / "settings.json").read_text() == "{not json"


def _snapshot(models: list[ModelConfig], chain: list[str] | None = None) -> Config:
    return Config.model_validate({"models": [m.model_dump() for m in models],
                                  "chains": {"chat": chain or []}})


def test_the_registry_is_read_from_each_snapshot_and_never_changed() -> None:
    """The models and the chains have one owner, the settings snapshot: a new snapshot gives
    a new registry (`adopt`), the old one stays as it was for a turn still running on it, the
    fall-backs found at start stand while no model is set, and a provider already built for
    a model that did not change is kept. Before: the Settings page changed the one registry in
    place (`put`, `remove`, `set_chat_chain`) beside the config snapshot, two owners."""
    mine = ModelConfig(id="mine", model="m", base_url="http://127.0.0.1:9/v1")
    more = ModelConfig(id="more", model="m2", base_url="http://127.0.0.1:9/v1")
    found = ModelRegistry.from_config(Config(), environ={"OPENAI_API_KEY": "x"})
    assert found.ids() == ["openai"] and found.chat_chain == ["openai"]
    added = found.adopt(_snapshot([mine]))
    assert added.ids() == ["mine"] and added.chat_chain == ["mine"]  # the fall-backs give way
    assert found.ids() == ["openai"]  # the old snapshot's registry is untouched
    both = added.adopt(_snapshot([mine, more]))
    assert both.chat_chain == ["mine", "more"]  # not picked: every model, in order
    built = both.for_chat()
    picked = both.adopt(_snapshot([mine, more], ["more"]))
    assert picked.chat_chain == ["more"] and picked.for_chat().model_id == "more"
    assert picked.for_chat("mine") is built  # unchanged: its provider is kept, not rebuilt
    changed = picked.adopt(_snapshot([mine.model_copy(update={"model": "m9"}), more]))
    assert changed.for_chat("mine") is not built  # changed: built afresh
    back = changed.adopt(Config())
    assert back.ids() == ["openai"]  # no model set again: the fall-backs found at start
    assert not hasattr(found, "put") and not hasattr(found, "set_chat_chain")


def test_a_price_given_on_the_page_prices_the_next_turn_without_a_restart(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    added = _add(client, csrf, base_url=model_server.openai_base_url, api_key=KEY,
                 price_in="3", price_out="15")
    assert added.status_code == 303
    model_server.push(Reply(text="Priced.", usage=(1_000_000, 100_000)))
    run, _ = _chat(client, csrf, "hello")
    assert run["status"] == "complete", run
    usage = client.get("/api/usage", headers={"X-CSRF-Token": csrf}).json()
    (fake,) = usage["models"]
    (turns,) = [p for p in usage["purposes"] if p["purpose"] == "turn"]  # not its chores'
    assert fake["model_id"] == "fake" and turns["cost_usd"] == pytest.approx(4.5)


def test_the_models_table_says_when_a_models_breaker_skips_it(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    assert _add(client, csrf, base_url=model_server.openai_base_url,
                api_key=KEY).status_code == 303
    health = re.compile(r'class="model-health">([^<]*)<')
    assert health.findall(client.get("/settings").text) == ["answering"]
    breakers = _models(client).breakers
    for _ in range(3):  # failures in a row open it
        breakers.failed("fake")
    shown = health.findall(client.get("/settings").text)
    assert len(shown) == 1 and shown[0].startswith("skipped since")
    assert "3 failures in a row" in shown[0]
