"""A provider that answers 404 or cannot be reached: the sentence names the URL that was tried
(never a key, a password or a query), and a 404 on a base_url that misses (or doubles) /v1
says which base_url to try.

Both adapters run on their official SDKs against the scripted fake server over loopback; a
connection error is a stopped server's port, where nothing listens.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hearth.models.anthropic_provider import AnthropicProvider
from hearth.models.openai_compat import OpenAICompatProvider
from hearth.models.provider_common import shown_url
from hearth.models.types import (
    Message,
    ModelError,
    ModelRequest,
    ProviderUnavailable,
    ProviderUnreachable,
)
from tests.engine_harness import make_config, make_engine, one_turn
from tests.fakes.model_server import Reply, ScriptedModelServer

KEY = "sk-test-never-shown-0123456789abcdef"
HINT = "OpenAI-compatible servers usually serve under /v1 — try base_url"


def _openai(base_url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider(model_id="gpt", model_name="gpt-test", base_url=base_url,
                                api_key=KEY, timeout=10.0)


def _anthropic(base_url: str) -> AnthropicProvider:
    return AnthropicProvider(model_id="claude", model_name="claude-test", base_url=base_url,
                             api_key=KEY, timeout=10.0)


def _error(provider: OpenAICompatProvider | AnthropicProvider) -> ModelError:
    async def call() -> None:
        async for _event in provider.stream(ModelRequest([Message("user", "hi")], [])):
            pass

    with pytest.raises(ModelError) as raised:
        asyncio.run(call())
    assert KEY not in raised.value.sentence
    return raised.value


def _closed_port_url() -> str:
    with ScriptedModelServer() as gone:
        return gone.url  # stopped on leaving: nothing listens on its port any more


def test_a_404_without_v1_names_the_url_and_suggests_adding_v1(
        model_server: ScriptedModelServer) -> None:
    error = _error(_openai(model_server.url))
    assert type(error) is ProviderUnavailable
    assert error.sentence.startswith(
        f"gpt answered HTTP 404 at {model_server.url}/chat/completions; {HINT} "
        f"{model_server.url}/v1 (it said: ")
    assert model_server.requests == []  # the fake records model calls only: none arrived


def test_a_404_under_v1_names_the_url_without_the_v1_hint(
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(status=404))  # e.g. a model the server does not have
    error = _error(_openai(f"{model_server.openai_base_url}/"))
    assert error.sentence.startswith(
        f"gpt answered HTTP 404 at {model_server.openai_base_url}/chat/completions: ")
    assert "/v1 —" not in error.sentence and "Scripted error 404" in error.sentence


def test_a_404_from_an_anthropic_base_url_with_v1_suggests_dropping_it(
        model_server: ScriptedModelServer) -> None:
    error = _error(_anthropic(f"{model_server.url}/v1"))
    assert error.sentence.startswith(
        f"claude answered HTTP 404 at {model_server.url}/v1/v1/messages; the Anthropic SDK "
        f"adds /v1 to base_url itself — try base_url {model_server.url} (it said: ")


@pytest.mark.parametrize("status", [401, 500])
def test_another_status_names_the_url_too(model_server: ScriptedModelServer,
                                          status: int) -> None:
    model_server.push(Reply(status=status, echo_key=True))  # and repeats the key: masked
    error = _error(_openai(model_server.openai_base_url))
    assert error.sentence.startswith(
        f"gpt answered HTTP {status} at {model_server.openai_base_url}/chat/completions: ")
    assert "Incorrect API key provided: [redacted]" in error.sentence


@pytest.mark.parametrize(("make", "path"), [(_openai, "/v1/chat/completions"),
                                            (_anthropic, "/v1/messages")])
def test_a_connection_error_names_the_url_that_was_tried(make: object, path: str) -> None:
    url = _closed_port_url()
    base = f"{url}/v1" if make is _openai else url
    error = _error(make(base))  # type: ignore[operator]
    assert isinstance(error, ProviderUnreachable)
    model_id = "gpt" if make is _openai else "claude"
    assert error.sentence.startswith(f"{model_id} could not be reached at {url}{path}: ")


def test_a_password_in_the_base_url_is_not_in_the_sentence(
        model_server: ScriptedModelServer) -> None:
    password = "pw-hunter2-0123456789"
    base = model_server.url.replace("http://", f"http://hearth:{password}@")
    error = _error(_openai(base))
    assert password not in error.sentence and "hearth:" not in error.sentence
    assert f"at {model_server.url}/chat/completions;" in error.sentence
    assert f"try base_url {model_server.url}/v1" in error.sentence


def test_a_shown_url_keeps_no_user_password_query_or_fragment() -> None:
    assert shown_url("https://u:p@host:8443/v1/chat/completions?key=abc#frag") == (
        "https://host:8443/v1/chat/completions")
    assert shown_url("http://[::1]:11434/v1") == "http://[::1]:11434/v1"


def test_a_turn_on_a_base_url_without_v1_ends_saying_the_url_and_the_fix(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.url))
    view, _events = one_turn(engine, "hello")
    assert (view["status"], view["ending"]) == ("error", "model_error"), view
    assert view["sentence"].startswith(
        f"The model call failed: fake answered HTTP 404 at {model_server.url}/chat/completions; "
        f"{HINT} {model_server.url}/v1 (it said: ")
