"""An app past its spending limit on the OpenAI-compatible API (`/v1/chat/completions`): 429
`spending_limit` in OpenAI's error shape with the limit's sentence and `Retry-After`, streamed
or not, whether the limit was reached before the request (refused before anything is
admitted) or the turn's first model call would pass it (refused before that call is sent). A
real gateway (in this process, over HTTP) whose one model is priced, driven by the official
`openai` client with an app's token."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.apps import app_token


def _priced(server: ScriptedModelServer) -> str:
    return (f'[[models]]\nid = "paid"\nprovider = "openai"\nbase_url = "{server.openai_base_url}"'
            '\napi_key = "sk-test"\nmodel = "fake-model"\nprice_in_per_mtok = 2.0\n'
            'price_out_per_mtok = 10.0\nmax_output_tokens = 2000\n\n[chains]\nchat = ["paid"]\n\n'
            '[learning]\nevery_turns = 1000\n\n[limits.apps.broke]\nusd_per_day = 0\n\n'
            '[limits.apps.thrifty]\nusd_per_day = 0.01\n\n[limits.apps.thrifty-tools]\n'
            'usd_per_day = 0.03\n')


server, gateway, api = module_gateway("openai-spending", _priced)
ASK = [{"role": "user", "content": "spend something"}]


def _client(gateway: Gateway, api: Api, app: str) -> openai.OpenAI:
    token = app_token(api, app, "send_messages")
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=token, max_retries=0,
                         timeout=30)


def _is_the_limits_429(error: openai.APIStatusError, app: str) -> None:
    assert error.status_code == 429
    body = error.body
    assert isinstance(body, dict)
    assert (body["type"], body["code"]) == ("rate_limit_error", "spending_limit")
    assert f'daily spending limit for the app "{app}"' in body["message"]
    assert "It resets at" in body["message"]
    assert int(error.response.headers["Retry-After"]) > 0


@pytest.mark.parametrize("stream", [False, True])
def test_an_app_at_a_zero_limit_is_429_with_the_sentence_and_nothing_is_sent(
        gateway: Gateway, api: Api, server: ScriptedModelServer, stream: bool) -> None:
    before = len(server.requests)
    with _client(gateway, api, "broke") as client:
        with pytest.raises(openai.RateLimitError) as raised:
            answer = client.chat.completions.create(model="hearth", messages=ASK,
                                                    stream=stream)
            if stream:
                list(answer)  # type: ignore[arg-type]
    _is_the_limits_429(raised.value, "broke")
    assert len(server.requests) == before  # no model call was made


@pytest.mark.parametrize("stream", [False, True])
def test_a_turn_whose_first_call_would_pass_the_limit_is_429_not_502(
        gateway: Gateway, api: Api, server: ScriptedModelServer, stream: bool) -> None:
    """$0.01 a day, nothing spent yet: the limit is not reached, so the turn is admitted; its
    first call reserves its whole output allowance (2,000 tokens at $10 per million: $0.02,
    with its input) and is refused before it is sent."""
    before = len(server.requests)
    with _client(gateway, api, "thrifty") as client:
        with pytest.raises(openai.RateLimitError) as raised:
            answer = client.chat.completions.create(model="hearth", messages=ASK,
                                                    stream=stream)
            if stream:
                list(answer)  # type: ignore[arg-type]
    _is_the_limits_429(raised.value, "thrifty")
    assert "and this call could cost up to $" in raised.value.body["message"]  # type: ignore[index]
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(server.requests) == before


def test_a_stream_refused_once_it_began_ends_with_the_error_event(
        gateway: Gateway, api: Api, server: ScriptedModelServer) -> None:
    """The turn's first call answers and asks for a tool; the next call would pass the limit:
    the stream's text began, so the limit is its last event, in OpenAI's error shape. ($0.03 a
    day: the first call reserves about $0.021 and spends $0.015; the next would reserve as
    much again.)"""
    token = app_token(api, "thrifty-tools", "send_messages")
    server.push(Reply(text="Looking first.", tool_calls=[Call("list_dir", {"path": "."})],
                      usage=(10, 1500)))
    body = {"model": "hearth", "stream": True, "messages": ASK}
    with httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {token}",
                               "X-Hearth-Session": "tools-then-limit"}) as response:
        assert response.status_code == 200
        events = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines()
                  if line.startswith("data: {")]
    text = "".join(event["choices"][0]["delta"].get("content") or ""
                   for event in events[:-1] if event.get("choices"))
    assert text == "Looking first."
    error = events[-1]["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "spending_limit")
    assert 'daily spending limit for the app "thrifty-tools"' in error["message"]
    assert "It resets at" in error["message"]
