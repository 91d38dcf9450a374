"""The Settings page's model form, whole: the model's name chosen from what the endpoint's
`GET /models` lists (`POST /api/models/available`: awaited, never holding up the gateway;
bad input and a failed listing answered in the error envelope, a sentence the form shows),
every key a `[[models]]` entry has said and edited on the page (and used: the output cap
sent, the context window measured against, the prices counted), a model from config.toml
read-only here, a model added here joining the chat and background chains only when asked,
and a failed Test said in the models table instead of "answering".
In-process (Starlette's TestClient) against the scripted model server over loopback."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import write_config
from tests.support.dashboard import sign_in
from tests.web.test_settings import (
    KEY,
    _chat,
    _client,
    _models,
    echoing_provider as echoing_provider,  # the fixture
)

LIST = "/api/models/available"


@pytest.fixture
def client(home: Path) -> Iterator[TestClient]:
    with _client(home) as test_client:
        yield test_client


@pytest.fixture
def with_toml(home: Path, model_server: ScriptedModelServer) -> Iterator[TestClient]:
    """The dashboard with config.toml's model `fake` (fake-model on the scripted server)."""
    write_config(home, model_server.openai_base_url)
    with _client(home) as test_client:
        yield test_client


def _list(client: TestClient, csrf: str, **body: Any) -> Any:
    return client.post(LIST, json=body, headers={"X-CSRF-Token": csrf})


def _add(client: TestClient, csrf: str, **fields: str) -> Any:
    form = {"kind": "openai", "id": "mine", "model": "fake-model", "csrf": csrf, **fields}
    return client.post("/settings/models", data=form)


def _state(page: str, model_id: str) -> tuple[str, str]:
    """A model's State in the models table: its words, and the sentence why, if any."""
    row = re.search(rf'<tr data-model="{re.escape(model_id)}"[^>]*>(.*?)</tr>', page, re.S)
    assert row, f"the models table has no row for {model_id}"
    words = re.search(r'class="model-health">([^<]*)<', row.group(1))
    why = re.search(rf'data-why="{re.escape(model_id)}"><td colspan="5">'
                    r'<p class="model-health-why">([^<]*)<', page)
    assert words
    return words.group(1), why.group(1) if why else ""


def test_the_endpoints_models_are_listed_with_the_key_given(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    model_server.listed_models = ["gpt-b", "Gpt-a", "gpt-b", "llama3.1"]
    listed = _list(client, csrf, provider="openai", base_url=model_server.openai_base_url,
                   api_key=KEY)
    assert listed.status_code == 200, listed.text
    assert listed.json() == {"models": ["Gpt-a", "gpt-b", "llama3.1"],
                             "sentence": "3 models offered by this endpoint."}
    assert model_server.listing_headers[-1]["authorization"] == f"Bearer {KEY}"
    anthropic = _list(client, csrf, provider="anthropic", api_key=KEY,
                      base_url=model_server.anthropic_base_url)
    assert anthropic.json()["models"] == ["Gpt-a", "gpt-b", "llama3.1"]
    sent = model_server.listing_headers[-1]
    assert "anthropic-version" in sent  # asked as Anthropic's SDK asks
    assert KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))


def test_a_model_being_edited_is_listed_with_its_own_key_never_sent_to_the_page(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    assert _add(client, csrf, base_url=model_server.openai_base_url,
                api_key=KEY).status_code == 303
    listed = _list(client, csrf, model_id="mine", base_url=model_server.openai_base_url)
    assert listed.status_code == 200 and listed.json()["models"] == ["fake-model"]
    assert model_server.listing_headers[-1]["authorization"] == f"Bearer {KEY}"
    page = client.get("/settings?model=mine").text
    assert KEY not in page and 'data-editing="mine"' in page


@pytest.mark.parametrize(("body", "status", "code", "said"), [
    ({"base_url": "localhost:1234/v1"}, 422, "invalid_request",
     "base_url: base_url must start with http:// or https://"),
    ({"base_url": "http://:99999"}, 422, "invalid_request", "base_url must be one web address"),
    ({"provider": "gemini"}, 422, "invalid_request", "provider"),
    ({"api_key_env": "BAD-NAME"}, 422, "invalid_request", "api_key_env"),
    ({"api_key": "x" * 501}, 422, "invalid_request", "api_key"),
    ({"endpoint": "x"}, 422, "invalid_request", "endpoint"),
    ({"model_id": "nope"}, 404, "model_not_found", "There is no model called nope."),
    ({"api_key_env": "HEARTH_TEST_UNSET_KEY"}, 422, "key_missing",
     "HEARTH_TEST_UNSET_KEY is not set in the gateway's environment"),
])
def test_bad_input_is_refused_in_the_envelope(
        client: TestClient, body: dict[str, str], status: int, code: str, said: str) -> None:
    csrf = sign_in(client)
    answer = _list(client, csrf, **body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and said in error["message"]


def test_a_listing_that_fails_says_why_and_never_the_key(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    model_server.listing_status = 401
    refused = _list(client, csrf, base_url=model_server.openai_base_url, api_key=KEY)
    assert refused.status_code == 502
    error = refused.json()["error"]
    assert error["code"] == "models_unlisted"
    assert "answered HTTP 401" in error["message"] and "/v1/models" in error["message"]
    assert KEY not in refused.text
    gone = _list(client, csrf, base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert gone.status_code == 502 and "could not be reached" in gone.json()["error"]["message"]
    model_server.listing_status, model_server.listed_models = 200, []
    empty = _list(client, csrf, base_url=model_server.openai_base_url)
    assert empty.status_code == 502 and "lists no models" in empty.json()["error"]["message"]
    assert client.post(LIST, json={}).status_code == 403  # a cookie without the CSRF token


def test_a_provider_repeating_the_key_has_it_masked(
        client: TestClient, echoing_provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    csrf = sign_in(client)
    plain = "correct-horse-battery-staple-42"  # no key's usual shape: masked as the key given
    for key in (KEY, plain):
        refused = _list(client, csrf, base_url=echoing_provider, api_key=key)
        assert refused.status_code == 502
        message = refused.json()["error"]["message"]
        assert "Incorrect API key provided: [redacted]" in message
        assert key not in refused.text and key[:12] not in refused.text
        assert key not in caplog.text


def test_a_slow_listing_never_holds_up_the_gateway(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    model_server.listing_delay = 2.0
    answered: list[float] = []

    def slow() -> None:
        _list(client, csrf, base_url=model_server.openai_base_url)
        answered.append(time.monotonic())

    began = time.monotonic()
    listing = threading.Thread(target=slow)
    listing.start()
    while not model_server.listing_headers and time.monotonic() - began < 5:
        time.sleep(0.01)
    asked = time.monotonic()
    assert client.get("/healthz").status_code == 200
    meanwhile = time.monotonic()
    listing.join(10)
    assert meanwhile - asked < 1.0  # not held until the endpoint answered (2 s)
    assert answered and meanwhile < answered[0] - 0.5  # healthz answered while it listed


def _every_field(url: str) -> dict[str, str]:
    return {"base_url": url, "api_key": KEY, "tools": "off", "vision": "on",
            "context_window": "4000", "max_output_tokens": "321", "timeout_seconds": "45",
            "price_in": "3", "price_out": "15", "price_speech": "20", "price_audio": "0.01"}


def test_every_key_of_a_models_entry_is_kept_and_used(
        client: TestClient, home: Path, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    added = _add(client, csrf, **_every_field(model_server.openai_base_url))
    assert added.status_code == 303, added.text
    model = _models(client).config_of("mine")
    assert (model.tools, model.vision, model.context_window, model.max_output_tokens,
            model.timeout_seconds) == (False, True, 4000, 321, 45)
    assert (model.price_in_per_mtok, model.price_out_per_mtok, model.price_speech_per_mchar,
            model.price_audio_per_minute) == (3, 15, 20, 0.01)
    kept = json.loads((home / "settings.json").read_text())["models"][0]
    assert kept["context_window"] == 4000 and kept["vision"] is True
    row = client.get("/settings").text
    assert "4k context · 321 out · vision · no tools · $3 / $15 per 1M tokens" in row

    model_server.push(Reply(text="Used.", usage=(1200, 100_000)))
    run, answer = _chat(client, csrf, "hello")
    assert run["status"] == "complete" and answer == "Used.", run
    call = model_server.calls("/v1/chat/completions")[-1]
    assert call.body["max_tokens"] == 321 and "tools" not in call.body  # its cap; no tools
    page = client.get(f"/chats/{run['session']}").text
    assert "30% of the window" in page  # 1200 of its 4000 tokens
    usage = client.get("/api/usage", headers={"X-CSRF-Token": csrf}).json()
    (turns,) = [p for p in usage["purposes"] if p["purpose"] == "turn"]
    assert turns["cost_usd"] == pytest.approx(1200 * 3 / 1e6 + 100_000 * 15 / 1e6)


@pytest.mark.parametrize(("fields", "sentence"), [
    ({"context_window": "512"}, "The context window is a whole number from 1,024"),
    ({"context_window": "lots"}, "The context window is a whole number"),
    ({"max_output_tokens": "0"}, "The most output tokens is a whole number from 1"),
    ({"context_window": "2000", "max_output_tokens": "4000"}, "cannot be more than the context"),
    ({"timeout_seconds": "-5"}, "The time a call may take is a whole number"),
    ({"price_speech": "x"}, "The read-aloud price is US dollars per million characters"),
    ({"price_audio": "-1"}, "The voice-note price is US dollars per minute"),
])
def test_a_bad_field_is_refused_with_a_sentence(
        client: TestClient, fields: dict[str, str], sentence: str) -> None:
    csrf = sign_in(client)
    answer = _add(client, csrf, **fields)
    assert answer.status_code == 422 and sentence in answer.text
    assert _models(client).ids() == []


def test_an_added_model_is_edited_keeping_its_key(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    _add(client, csrf, **_every_field(model_server.openai_base_url))
    form = client.get("/settings?model=mine").text
    assert 'action="/settings/models/mine"' in form and "Edit mine" in form
    for shown in ('name="context_window" inputmode="numeric" maxlength="10"\n'
                  '               placeholder="128000" value="4000"', 'value="321"',
                  'name="vision" value="on"\n      checked'):
        assert shown in form
    edited = client.post("/settings/models/mine", data={
        "csrf": csrf, "kind": "openai", "model": "other-model", "id": "ignored",
        "base_url": model_server.openai_base_url, "vision": "", "tools": "on",
        "context_window": "200000", "max_output_tokens": "1000", "price_in": "1",
        "in_chat": "on", "in_background": "on"})
    assert edited.status_code == 303, edited.text
    assert edited.headers["location"] == "/settings?saved=edited#models"
    model = _models(client).config_of("mine")
    assert _models(client).ids() == ["mine"]  # the id stays; "ignored" is no model
    assert (model.model, model.vision, model.tools, model.context_window,
            model.price_in_per_mtok, model.price_out_per_mtok) == (
        "other-model", False, True, 200_000, 1, None)
    assert model.api_key == KEY  # left empty: kept
    model_server.push(Reply(text="OK"))
    client.post("/settings/models/mine/test", data={"csrf": csrf})
    call = model_server.calls("/v1/chat/completions")[-1]
    assert call.model == "other-model" and call.headers["authorization"] == f"Bearer {KEY}"
    bad = client.post("/settings/models/mine", data={"csrf": csrf, "kind": "openai",
                                                    "model": "x", "context_window": "9"})
    assert bad.status_code == 422 and "Edit mine" in bad.text  # the form stays the edit
    assert _models(client).config_of("mine").model == "other-model"


def test_a_model_from_config_toml_is_read_only_here_and_says_so(with_toml: TestClient) -> None:
    client = with_toml
    csrf = sign_in(client)
    page = client.get("/settings").text
    assert "read-only here" in page and 'href="/settings?model=fake' not in page
    for answer in (client.get("/settings?model=fake"),
                   client.post("/settings/models/fake", data={"csrf": csrf, "kind": "openai",
                                                              "model": "x"}),
                   client.post("/settings/models/fake/remove", data={"csrf": csrf})):
        assert answer.status_code in (409, 422)
        assert "fake comes from config.toml, read as the gateway starts, so it is read-only " \
               "here" in answer.text
    assert _models(client).config_of("fake").model == "fake-model"
    assert client.get("/settings?model=nope").status_code == 404


def test_an_added_model_joins_the_chains_only_when_asked(
        with_toml: TestClient, home: Path, model_server: ScriptedModelServer) -> None:
    client = with_toml
    csrf = sign_in(client)
    url = model_server.openai_base_url
    models = _models(client)
    assert models.chat_chain == ["fake"] and models.chain("background") == ["fake"]
    assert 'name="in_chat"' in client.get("/settings").text  # the boxes are offered
    assert _add(client, csrf, id="quiet", model="quiet-model", base_url=url).status_code == 303
    models = _models(client)
    assert models.chat_chain == ["fake"] and models.chain("background") == ["fake"]
    assert json.loads((home / "settings.json").read_text())["chat_chain"] == ["fake"]

    assert _add(client, csrf, id="spare", model="spare-model", base_url=url,
                in_chat="on").status_code == 303
    models = _models(client)
    assert models.chat_chain == ["fake", "spare"] and models.chain("background") == ["fake"]
    assert _add(client, csrf, id="chores", model="chores-model", base_url=url,
                in_background="on").status_code == 303
    models = _models(client)
    assert models.chat_chain == ["fake", "spare"]
    assert models.chain("background") == ["fake", "chores"]
    page = client.get("/settings").text
    assert "Background work runs on fake → chores." in page

    # the chain is used: a failing first model falls back to the one asked for, not "quiet"
    model_server.push(Reply(status=503), model="fake-model")
    model_server.push(Reply(text="From the spare."), model="spare-model")
    run, answer = _chat(client, csrf, "hello")
    assert answer == "From the spare.", run
    assert not [c for c in model_server.every_call() if c.model == "quiet-model"]

    edit = {"csrf": csrf, "kind": "openai", "model": "chores-model", "base_url": url}
    assert client.post("/settings/models/chores", data=edit).status_code == 303  # no boxes
    assert _models(client).chain("background") == ["fake"]
    assert client.post("/settings/models/quiet", data={**edit, "model": "quiet-model",
                                                       "in_chat": "on"}).status_code == 303
    assert _models(client).chat_chain == ["fake", "spare", "quiet"]


def test_the_first_model_is_every_chains_and_the_last_cannot_leave_them(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    first = client.get("/settings").text
    assert "Your first model answers every chat" in first and 'name="in_chat"' not in first
    assert _add(client, csrf, base_url=model_server.openai_base_url).status_code == 303
    models = _models(client)
    assert models.chat_chain == ["mine"] and models.chain("background") == ["mine"]
    edit = client.get("/settings?model=mine").text
    assert re.search(r'name="in_chat" value="on"\s+checked', edit)  # it is in the chain
    left = client.post("/settings/models/mine", data={
        "csrf": csrf, "kind": "openai", "model": "fake-model", "in_background": "on"})
    assert left.status_code == 422 and "the only model of the chat chain" in left.text


def test_a_failed_test_is_said_in_the_models_table_not_answering(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    _add(client, csrf, base_url=model_server.openai_base_url, api_key=KEY)
    assert _state(client.get("/settings").text, "mine") == ("answering", "")
    model_server.push(Reply(status=500))
    tested = client.post("/settings/models/mine/test", data={"csrf": csrf})
    words, why = _state(tested.text, "mine")
    assert words.startswith("failed its Test at") and "answering" not in words
    assert why.startswith("mine did not answer") and "HTTP 500" in why
    assert _state(client.get("/settings").text, "mine")[0].startswith("failed its Test")
    model_server.push(Reply(text="Hi."))
    run, _ = _chat(client, csrf, "hello")  # a real call that answers clears it
    assert run["status"] == "complete", run
    assert _state(client.get("/settings").text, "mine") == ("answering", "")
    model_server.push(Reply(status=500))
    client.post("/settings/models/mine/test", data={"csrf": csrf})
    model_server.push(Reply(text="OK"))
    again = client.post("/settings/models/mine/test", data={"csrf": csrf})
    assert _state(again.text, "mine") == ("answering", "")  # a Test that answers clears it


def test_editing_while_settings_json_is_unreadable_says_so(
        home: Path, model_server: ScriptedModelServer) -> None:
    write_config(home, model_server.openai_base_url)
    (home / "settings.json").write_text("{not json")
    with _client(home) as client:
        sign_in(client)
        editing = client.get("/settings?model=fake")
        assert editing.status_code == 409 and "fix or remove it" in editing.text
    assert (home / "settings.json").read_text() == "{not json"
