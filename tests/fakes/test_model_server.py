"""Tests for the scripted fake model server, driven through the official SDKs over loopback.

These pin down that :mod:`tests.fakes.model_server` speaks the real OpenAI / Anthropic / Ollama
wire protocols well enough for the unmodified ``openai`` and ``anthropic`` clients, and that its
scripting features (queues, faults, hold) behave as documented.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.model_server import Call, Recorded, Reply, ScriptedModelServer


@pytest.fixture(scope="module")
def _server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def server(_server: ScriptedModelServer) -> ScriptedModelServer:
    _server.reset()
    return _server


@pytest.fixture(scope="module")
def oai(_server: ScriptedModelServer) -> openai.OpenAI:
    # module-scoped: constructing SDK clients costs ~50 ms each
    return openai.OpenAI(
        base_url=_server.openai_base_url, api_key="test", max_retries=0, timeout=10
    )


@pytest.fixture(scope="module")
def ant(_server: ScriptedModelServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=_server.anthropic_base_url, api_key="test", max_retries=0, timeout=10
    )


MSGS = [{"role": "user", "content": "hi"}]


def _stream_openai(client: openai.OpenAI, model: str = "gpt-test", **kw: Any) -> list[Any]:
    return list(client.chat.completions.create(model=model, messages=MSGS, stream=True, **kw))


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# ---------------------------------------------------------------------- basics


def test_urls_and_lifecycle() -> None:
    server = ScriptedModelServer()
    server.start()
    try:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.openai_base_url == server.url + "/v1"
        assert server.anthropic_base_url == server.url
        assert _get(server.url + "/v1/models")[0] == 200
    finally:
        server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url + "/v1/models", timeout=2)


def test_stop_drops_held_call_and_restart_reuses_port() -> None:
    server = ScriptedModelServer().start()
    port = server.port
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="t", max_retries=0, timeout=5)
    started = threading.Event()
    server.push(Reply(text="never", hold=threading.Event(), started=started))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            _stream_openai(client)
        except openai.APIConnectionError as err:
            errors.append(err)

    worker = threading.Thread(target=call)
    worker.start()
    assert started.wait(5)
    server.stop()
    worker.join(5)
    assert not worker.is_alive() and len(errors) == 1
    server.start()
    try:
        assert server.port == port
        assert _text(_stream_openai(client)) == "ok"
    finally:
        server.stop()


# ---------------------------------------------------------------------- OpenAI


def test_openai_streamed_text_reassembles(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="Hello there, general Kenobi", chunks=4))
    chunks = _stream_openai(oai)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert _text(chunks) == "Hello there, general Kenobi"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 4
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.model == "gpt-test" and c.object == "chat.completion.chunk" for c in chunks)
    assert all(c.usage is None for c in chunks)  # no include_usage -> no usage chunk

    rec = server.calls("/v1/chat/completions")
    assert len(rec) == 1 and rec[0].stream and rec[0].model == "gpt-test"
    assert rec[0].messages == MSGS
    assert rec[0].headers["authorization"] == "Bearer test"


def test_openai_stream_helper_and_default(server: ScriptedModelServer,
                                          oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(model="m", messages=MSGS) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "ok"
    assert final.choices[0].finish_reason == "stop"


def test_openai_streamed_tool_calls(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(
        Reply(
            text="Let me look.",
            tool_calls=[
                Call("search", {"query": "weather in Paris"}, id="call_abc"),
                Call("clock", {}),
            ],
        )
    )
    chunks = _stream_openai(oai, tools=[])
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                entry["id"] = tc.id
                assert tc.type == "function"
            if tc.function and tc.function.name:
                entry["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                entry["arguments"] += tc.function.arguments
    assert _text(chunks) == "Let me look."
    assert calls[0]["id"] == "call_abc" and calls[0]["name"] == "search"
    assert json.loads(calls[0]["arguments"]) == {"query": "weather in Paris"}
    assert calls[1]["id"].startswith("call_") and calls[1]["name"] == "clock"
    assert json.loads(calls[1]["arguments"]) == {}
    # arguments arrive in 2 fragments per call, after a header delta
    arg_deltas = [
        tc
        for c in chunks
        if c.choices
        for tc in c.choices[0].delta.tool_calls or []
        if tc.id is None
    ]
    assert len(arg_deltas) == 4
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_openai_invalid_arguments_sent_verbatim(
    server: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    server.push(Reply(tool_calls=[Call("broken", '{"a": 1,,')]))
    chunks = _stream_openai(oai)
    args = "".join(
        tc.function.arguments or ""
        for c in chunks
        if c.choices
        for tc in c.choices[0].delta.tool_calls or []
        if tc.function
    )
    assert args == '{"a": 1,,'


def test_openai_usage_with_include_usage(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="one two three"), Reply(text="x", usage=(123, 45)))
    chunks = _stream_openai(oai, stream_options={"include_usage": True})
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (10, 4)
    assert chunks[-1].usage.total_tokens == 14
    chunks = _stream_openai(oai, stream_options={"include_usage": True})
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (123, 45)


def test_openai_non_stream(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="plain"), Reply(tool_calls=[Call("f", {"x": 1}, id="c1")]))
    resp = oai.chat.completions.create(model="m", messages=MSGS)
    assert resp.object == "chat.completion"
    assert resp.choices[0].message.content == "plain"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.prompt_tokens == 10
    resp = oai.chat.completions.create(model="m", messages=MSGS)
    tc = resp.choices[0].message.tool_calls
    assert tc is not None and tc[0].id == "c1" and tc[0].function.name == "f"
    assert json.loads(tc[0].function.arguments) == {"x": 1}
    assert resp.choices[0].finish_reason == "tool_calls"
    assert server.requests[0].stream is False


def test_openai_cut_after_ends_cleanly(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="abcdefghi", tool_calls=[Call("f", {"k": "v"})], cut_after=4))
    chunks = _stream_openai(oai, stream_options={"include_usage": True})  # must not raise
    assert all(c.choices and c.choices[0].finish_reason is None for c in chunks)
    assert all(c.usage is None for c in chunks)
    assert _text(chunks) == "abcdefghi"
    # 1 role chunk + 3 text deltas + 1 tool-call header delta; no argument fragments
    assert len(chunks) == 5
    assert chunks[-1].choices[0].delta.tool_calls[0].function.name == "f"


def test_openai_explicit_finish_reason(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="trunc", finish_reason="length"))
    assert _stream_openai(oai)[-1].choices[0].finish_reason == "length"


def test_openai_error_statuses(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(status=500), Reply(status=429), Reply(status=401))
    with pytest.raises(openai.InternalServerError):
        _stream_openai(oai)
    with pytest.raises(openai.RateLimitError) as exc_info:
        _stream_openai(oai)
    assert exc_info.value.response.headers["retry-after"] == "0"
    assert exc_info.value.code == "rate_limit_exceeded"
    with pytest.raises(openai.AuthenticationError):
        oai.chat.completions.create(model="m", messages=MSGS)
    assert len(server.requests) == 3


def test_openai_stall(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="slow", stall=0.3))
    t0 = time.monotonic()
    stream = oai.chat.completions.create(model="m", messages=MSGS, stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    assert time.monotonic() - t0 < 0.25
    assert _text(list(stream)) == "slow"
    assert time.monotonic() - t0 >= 0.3


def test_hold_keeps_call_in_flight(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    hold, started = threading.Event(), threading.Event()
    server.push(Reply(text="released", hold=hold, started=started))
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(_text(_stream_openai(oai))))
    worker.start()
    assert started.wait(5)
    assert server.wait_for_requests(1, timeout=5)  # recorded before the hold
    worker.join(0.2)
    assert worker.is_alive() and result == []
    hold.set()
    worker.join(5)
    assert result == ["released"]


def test_per_model_queues(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.push(Reply(text="for-a-1"), Reply(text="for-a-2"), model="model-a")
    server.push("shared")  # str shorthand
    server.default = Reply(text="fallback")
    assert _text(_stream_openai(oai, model="model-b")) == "shared"
    assert _text(_stream_openai(oai, model="model-a")) == "for-a-1"
    assert _text(_stream_openai(oai, model="model-b")) == "fallback"
    assert _text(_stream_openai(oai, model="model-a")) == "for-a-2"
    assert _text(_stream_openai(oai, model="model-a")) == "fallback"
    assert [r.model for r in server.requests] == ["model-b", "model-a", "model-b"] + ["model-a"] * 2


def test_responder_answers_by_the_request_after_the_queues(server: ScriptedModelServer,
                                                          oai: openai.OpenAI) -> None:
    def respond(request: Recorded) -> Reply | None:
        said = str(request.messages[-1]["content"])
        return Reply(text=f"you said {said}") if said != "hi" else None  # None: the default

    server.responder = respond
    server.push("queued")
    server.default = Reply(text="fallback")
    assert _text(_stream_openai(oai)) == "queued"  # the queues come first
    assert _text(_stream_openai(oai)) == "fallback"  # MSGS says "hi": the responder declined
    asked = oai.chat.completions.create(model="gpt-test",
                                        messages=[{"role": "user", "content": "beds"}])
    assert asked.choices[0].message.content == "you said beds"
    assert _chore(oai, "title") == "A title"  # a chore keeps its own script
    assert len(server.requests) == 3 and len(server.every_call()) == 4


def test_keep_requests_off_keeps_none(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    server.keep_requests = False
    assert _text(_stream_openai(oai)) == "ok" and _chore(oai, "learning") == '{"items": []}'
    assert server.requests == [] and server.calls(chores=True) == [] and not server.every_call()
    server.reset()  # back to keeping them
    assert server.keep_requests and server.responder is None


def test_async_openai_client(server: ScriptedModelServer) -> None:
    server.push(Reply(text="async works"))

    async def go() -> str:
        client = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="t", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(model="m", messages=MSGS, stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(go()) == "async works"


def test_models_list_and_unknown_path(server: ScriptedModelServer, oai: openai.OpenAI) -> None:
    assert [m.id for m in oai.models.list()] == ["fake-model"]
    status, body = _get(server.url + "/v1/nope")
    assert status == 404 and "error" in body
    assert server.requests == []  # only model calls are recorded


# ---------------------------------------------------------------------- Anthropic


def test_anthropic_streamed_text_and_tool_use(
    server: ScriptedModelServer, ant: anthropic.Anthropic
) -> None:
    server.push(
        Reply(
            text="Checking the weather.",
            tool_calls=[Call("weather", {"city": "Paris"}, id="toolu_1"), Call("clock", {})],
            usage=(7, 9),
        )
    )
    with ant.messages.stream(model="claude-test", max_tokens=100, messages=MSGS) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Checking the weather."
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[0].text == "Checking the weather."
    assert (final.content[1].id, final.content[1].name) == ("toolu_1", "weather")
    assert final.content[1].input == {"city": "Paris"}
    assert final.content[2].name == "clock" and final.content[2].id.startswith("call_")
    assert final.stop_reason == "tool_use"
    assert final.model == "claude-test"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (7, 9)
    rec = server.calls("/v1/messages")
    assert len(rec) == 1 and rec[0].stream and "anthropic-version" in rec[0].headers


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("auto", "end_turn"),
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
    ],
)
def test_anthropic_stop_reason_mapping(
    server: ScriptedModelServer, ant: anthropic.Anthropic, finish: str, expected: str
) -> None:
    server.push(Reply(text="hi", finish_reason=finish))
    with ant.messages.stream(model="c", max_tokens=10, messages=MSGS) as stream:
        assert stream.get_final_message().stop_reason == expected


def test_anthropic_non_stream_and_errors(
    server: ScriptedModelServer, ant: anthropic.Anthropic
) -> None:
    server.push(Reply(text="plain", tool_calls=[Call("f", {"a": 1})]), Reply(status=529))
    msg = ant.messages.create(model="c", max_tokens=10, messages=MSGS)
    assert msg.content[0].text == "plain"
    assert msg.content[1].input == {"a": 1}
    assert msg.stop_reason == "tool_use"
    with pytest.raises(anthropic.APIStatusError) as exc_info:
        ant.messages.create(model="c", max_tokens=10, messages=MSGS)
    assert exc_info.value.status_code == 529
    assert exc_info.value.body["error"]["type"] == "overloaded_error"


def test_anthropic_cut_after(server: ScriptedModelServer, ant: anthropic.Anthropic) -> None:
    server.push(Reply(text="abcdef", cut_after=2))
    events = list(ant.messages.create(model="c", max_tokens=10, messages=MSGS, stream=True))
    types = [e.type for e in events]
    assert "message_delta" not in types and "message_stop" not in types
    assert types.count("content_block_delta") == 2


# ---------------------------------------------------------------------- Ollama


def test_ollama_tags(server: ScriptedModelServer) -> None:
    status, body = _get(server.url + "/api/tags")
    assert status == 200
    assert body["models"][0]["name"] == "llama3.1" and body["models"][0]["model"] == "llama3.1"
    server.ollama_tags = ["a", "b:7b"]
    assert [m["name"] for m in _get(server.url + "/api/tags")[1]["models"]] == ["a", "b:7b"]
    server.ollama_tags = None
    assert _get(server.url + "/api/tags")[0] == 404


# ---------------------------------------------------------------------- chores and error bodies


def _chore(client: openai.OpenAI, kind: str, model: str = "gpt-test") -> str:
    """A chore's request (its system prompt opens with the kind's words); the answer's text."""
    from tests.fakes.model_server import CHORE_PROMPTS

    messages = [{"role": "system", "content": f"{CHORE_PROMPTS[kind]} in a few words"}, *MSGS]
    return _text(list(client.chat.completions.create(model=model, messages=messages,
                                                     stream=True)))


def test_chore_requests_keep_their_own_script(server: ScriptedModelServer,
                                              oai: openai.OpenAI) -> None:
    server.push(Reply(text="the turn's"))
    server.push_chore(Reply(text="learned"), model="gpt-test", kind="learning")
    title = _chore(oai, "title")
    assert title == "A title"  # the kind's default: nothing pushed for it
    learned = _chore(oai, "learning")
    assert learned == "learned"
    assert _chore(oai, "learning") == '{"items": []}'
    assert _text(_stream_openai(oai)) == "the turn's"  # the turn's reply was left for it
    assert [r.chore for r in server.requests] == [None]
    assert [r.chore for r in server.calls(chores=True)] == ["title", "learning", "learning"]
    assert [r.chore for r in server.every_call()] == ["title", "learning", "learning", None]
    assert server.wait_for_requests(1, timeout=0) and not server.wait_for_requests(2, 0)


def test_chore_queues_most_precise_first(server: ScriptedModelServer,
                                         oai: openai.OpenAI) -> None:
    server.push_chore("any model, any kind")
    server.push_chore("a's summary", model="a", kind="summary")
    server.chore_replies["summary"] = Reply(text="the summary default")
    assert _chore(oai, "summary", "b") == (
        "any model, any kind")
    assert _chore(oai, "summary", "a") == "a's summary"
    assert _chore(oai, "summary", "a") == (
        "the summary default")
    server.reset()
    assert server.chore_replies["summary"].text != "the summary default"


def test_an_anthropic_chore_is_known_by_its_system_field(
        server: ScriptedModelServer, ant: anthropic.Anthropic) -> None:
    from tests.fakes.model_server import CHORE_PROMPTS

    server.push(Reply(text="turn"))
    msg = ant.messages.create(model="c", max_tokens=10, messages=MSGS,
                              system=CHORE_PROMPTS["summary"] + " in 60 words")
    assert msg.content[0].text.startswith("The user and the agent")
    assert server.requests == [] and [r.chore for r in server.calls(chores=True)] == ["summary"]


def test_the_chore_prompts_are_hearths_own() -> None:
    from hearth.engine.background.titles import SYSTEM_PROMPT as TITLE
    from hearth.engine.turn.compaction.fold import INSTRUCTIONS
    from hearth.memory.learning import SYSTEM_PROMPT as LEARNING
    from tests.fakes.model_server import CHORE_PROMPTS

    for kind, prompt in (("title", TITLE), ("learning", LEARNING), ("summary", INSTRUCTIONS)):
        assert prompt.startswith(CHORE_PROMPTS[kind]), kind


@pytest.mark.parametrize("body", [
    {"error": {"message": "This model's maximum context length is 8192 tokens.",
               "type": "invalid_request_error", "code": "context_length_exceeded"}},
    {"type": "error", "error": {"type": "invalid_request_error",
                                "message": "prompt is too long: 9000 tokens > 8192 maximum"}},
])
def test_an_error_status_with_a_body_of_the_tests_own(
        server: ScriptedModelServer, oai: openai.OpenAI, ant: anthropic.Anthropic,
        body: dict[str, Any]) -> None:
    server.push(Reply(status=400, error_body=body), Reply(status=400, error_body=body))
    with pytest.raises(openai.BadRequestError) as raised:
        _stream_openai(oai)
    assert raised.value.body == body["error"]  # the OpenAI SDK keeps the "error" object
    with pytest.raises(anthropic.BadRequestError) as refused:
        ant.messages.create(model="c", max_tokens=10, messages=MSGS)
    assert refused.value.body == body
