"""`response_format` on the OpenAI-compatible API: `json_object` and `json_schema` reach the
model the turn runs on (an OpenAI-compatible one as they were sent; an Anthropic one as its
structured output, `output_config.format`), `text` is the default and sends nothing, and what
the turn's model cannot keep, or a format of the wrong shape, is a 400 before anything is
admitted: never a 200 that ignored it. Driven by the official `openai` client (its `.parse()`
too, as LangChain's structured output and the Node SDK's send `json_schema`) against a real
gateway whose models are the scripted server, over both protocols."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway


def _two_protocols(server: ScriptedModelServer) -> str:
    """Beside "fake" (OpenAI's protocol, first in the chain), "claude" over Anthropic's."""
    return (f'[[models]]\nid = "claude"\nprovider = "anthropic"\n'
            f'base_url = "{server.anthropic_base_url}"\napi_key = "sk-ant-test"\n'
            'model = "claude-test"\n\n[learning]\nevery_turns = 1000\n')


server, gateway, api = module_gateway("openai-response-format", _two_protocols)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}},
          "required": ["city"], "additionalProperties": False}
AS_SCHEMA = {"type": "json_schema",
             "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}
ASK = [{"role": "user", "content": "Where is the Eiffel tower? Answer in JSON."}]


@pytest.fixture
def client(gateway: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=TOKEN, timeout=30,
                         max_retries=0)


def _turn_requests(server: ScriptedModelServer, since: int) -> list[Recorded]:
    return server.requests[since:]


def listed(api: Api) -> list[str]:
    return [chat["key"] for chat in api.http.get("/api/sessions").json()["sessions"]]


@pytest.mark.parametrize("response_format", [{"type": "json_object"}, AS_SCHEMA])
@pytest.mark.parametrize("stream", [False, True])
def test_an_openai_compatible_model_is_sent_the_format_as_it_was_asked(
        client: openai.OpenAI, server: ScriptedModelServer, response_format: dict[str, Any],
        stream: bool) -> None:
    since = len(server.requests)
    server.push(Reply(text='{"city": "Paris"}'))
    answer = client.chat.completions.create(model="fake", messages=ASK,  # type: ignore[call-overload]
                                            response_format=response_format, stream=stream)
    text = ("".join(c.choices[0].delta.content or "" for c in answer if c.choices) if stream
            else answer.choices[0].message.content)
    assert json.loads(text) == {"city": "Paris"}
    sent = _turn_requests(server, since)
    assert len(sent) == 1 and sent[0].path.endswith("/chat/completions")
    assert sent[0].body["response_format"] == response_format


def test_the_clients_parse_gets_its_typed_answer(client: openai.OpenAI,
                                                 server: ScriptedModelServer) -> None:
    class Place(BaseModel):
        city: str
        country: str

    since = len(server.requests)
    server.push(Reply(text='{"city": "Paris", "country": "France"}'))
    parsed = client.chat.completions.parse(model="hearth", messages=ASK,  # type: ignore[arg-type]
                                           response_format=Place)
    assert parsed.choices[0].message.parsed == Place(city="Paris", country="France")
    sent = _turn_requests(server, since)[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Place"
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["city", "country"]


def test_an_anthropic_model_is_held_to_the_schema_by_its_structured_output(
        client: openai.OpenAI, server: ScriptedModelServer) -> None:
    since = len(server.requests)
    server.push(Reply(text='{"city": "Paris"}'))
    answer = client.chat.completions.create(model="claude", messages=ASK,  # type: ignore[arg-type]
                                            response_format=AS_SCHEMA)
    assert json.loads(answer.choices[0].message.content or "") == {"city": "Paris"}
    sent = _turn_requests(server, since)
    assert len(sent) == 1 and sent[0].path.endswith("/messages")
    assert sent[0].body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "response_format" not in sent[0].body


def test_text_is_the_default_and_sends_no_format(client: openai.OpenAI,
                                                 server: ScriptedModelServer) -> None:
    since = len(server.requests)
    server.push(Reply(text="Paris."))
    answer = client.chat.completions.create(model="fake", messages=ASK,
                                            response_format={"type": "text"})
    assert answer.choices[0].message.content == "Paris."
    assert "response_format" not in _turn_requests(server, since)[0].body


def test_a_named_chat_keeps_the_format_to_the_turn_it_was_asked_for(
        client: openai.OpenAI, server: ScriptedModelServer) -> None:
    since = len(server.requests)
    server.push(Reply(text='{"city": "Paris"}'), Reply(text="It is in Paris."))
    named = {"X-Hearth-Session": "formats"}
    client.chat.completions.create(model="fake", messages=ASK,  # type: ignore[arg-type]
                                   response_format=AS_SCHEMA, extra_headers=named)
    client.chat.completions.create(model="fake", extra_headers=named, messages=[
        {"role": "user", "content": "Say it in words now."}])
    first, second = _turn_requests(server, since)
    assert first.body["response_format"] == AS_SCHEMA
    assert "response_format" not in second.body


def test_json_object_on_an_anthropic_model_is_refused_before_anything_is_sent(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    since, before = len(server.requests), listed(api)
    for named in ({}, {"X-Hearth-Session": "json-on-claude"}):
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="claude", messages=ASK,
                                           response_format={"type": "json_object"},
                                           extra_headers=named)
        body = raised.value.body
        assert isinstance(body, dict)
        assert (body["code"], body["param"]) == ("response_format_unsupported",
                                                 "response_format")
        assert "claude" in body["message"] and "json_schema" in body["message"]
    assert _turn_requests(server, since) == [] and listed(api) == before


@pytest.mark.parametrize(("response_format", "param"), [
    ({"type": "xml"}, "response_format.type"),
    ("json_object", "response_format"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": SCHEMA}},
     "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": "an object"}},
     "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "strict": "yes"}},
     "response_format.json_schema.strict"),
])
def test_a_format_of_the_wrong_shape_is_400(gateway: Gateway, server: ScriptedModelServer,
                                            response_format: object, param: str) -> None:
    since = len(server.requests)
    answer = httpx.post(gateway.url + "/v1/chat/completions", timeout=10,
                        headers={"Authorization": f"Bearer {TOKEN}"},
                        json={"model": "fake", "messages": ASK,
                              "response_format": response_format})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert _turn_requests(server, since) == []
