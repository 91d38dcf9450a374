"""The Anthropic adapter against the scripted fake model server, over real HTTP on loopback.

The official `anthropic` SDK talks to `ScriptedModelServer`'s Messages endpoint unmodified; the
tests pin down the request the adapter sends and the events it makes of the streamed answer,
including the cut-off and unreachable cases.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from hearth.models.anthropic_provider import AnthropicProvider
from hearth.models.types import (
    AnswerCutOff,
    Completed,
    Message,
    ModelError,
    ModelRequest,
    ProviderUnavailable,
    ResponseFormat,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

HELLO = [Message(role="user", text="hi")]


def _provider(base_url: str, max_output_tokens: int | None = None) -> AnthropicProvider:
    return AnthropicProvider(
        model_id="claude",
        model_name="claude-test",
        base_url=base_url,
        api_key="test",
        max_output_tokens=max_output_tokens,
        timeout=10.0,
    )


def _collect(provider: AnthropicProvider, request: ModelRequest) -> list[StreamEvent]:
    async def run() -> list[StreamEvent]:
        return [event async for event in provider.stream(request)]

    return asyncio.run(run())


def _collect_until_error(
    provider: AnthropicProvider, request: ModelRequest
) -> tuple[list[StreamEvent], BaseException | None]:
    seen: list[StreamEvent] = []

    async def run() -> None:
        async for event in provider.stream(request):
            seen.append(event)

    try:
        asyncio.run(run())
    except Exception as exc:  # noqa: BLE001 - the test inspects what was raised
        return seen, exc
    return seen, None


def test_streamed_text_reassembles_and_completes_with_stop_and_usage(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Reply(text="hello world, how are you", usage=(12, 5)))

    events = _collect(_provider(model_server.anthropic_base_url), ModelRequest(HELLO, []))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1  # really streamed in pieces
    assert "".join(d.text for d in deltas) == "hello world, how are you"
    assert isinstance(events[-1], Completed)
    assert [e for e in events if isinstance(e, Completed)] == [events[-1]]
    done = events[-1]
    assert done.finish_reason == "stop"
    assert done.usage == Usage(12, 5)
    assert done.model == "claude-test"
    assert done.tool_calls == ()


def test_two_tool_calls_reassemble_with_their_arguments(model_server: ScriptedModelServer) -> None:
    model_server.push(
        Reply(
            text="Let me look.",
            tool_calls=[
                Call("read_file", {"path": "a.txt"}, id="toolu_1"),
                Call("search", {"q": "hearth", "limit": 3}, id="toolu_2"),
            ],
            usage=(20, 9),
        )
    )

    events = _collect(_provider(model_server.anthropic_base_url), ModelRequest(HELLO, []))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."
    done = events[-1]
    assert isinstance(done, Completed)
    assert done.finish_reason == "tool_calls"
    assert done.tool_calls == (
        ToolCall(call_id="toolu_1", name="read_file", arguments={"path": "a.txt"}),
        ToolCall(call_id="toolu_2", name="search", arguments={"q": "hearth", "limit": 3}),
    )
    assert done.usage == Usage(20, 9)


def test_invalid_tool_json_is_kept_raw(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("read_file", '{"path": "a.t', id="toolu_9")]))

    events = _collect(_provider(model_server.anthropic_base_url), ModelRequest(HELLO, []))

    done = events[-1]
    assert isinstance(done, Completed)
    assert done.tool_calls == (
        ToolCall(call_id="toolu_9", name="read_file",
                 arguments={"_invalid_json": '{"path": "a.t'}),
    )


def test_request_body_has_system_merged_tool_results_tools_and_max_tokens(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Reply(text="done"))
    messages = [
        Message(role="system", text="You are Hearth."),
        Message(role="system", text="Be brief."),
        Message(role="user", text="read two files"),
        Message(
            role="assistant",
            text="Reading.",
            tool_calls=(
                ToolCall("toolu_a", "read_file", {"path": "a.txt"}),
                ToolCall("toolu_b", "read_file", {"path": "b.txt"}),
            ),
        ),
        Message(role="tool", text="contents of a", tool_call_id="toolu_a", tool_name="read_file"),
        Message(
            role="tool", text="no such file", tool_call_id="toolu_b", tool_name="read_file",
            is_error=True,
        ),
        Message(role="user", text="and now?"),
    ]
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    tools = [ToolSpec(name="read_file", description="Read a file.", parameters=schema)]

    _collect(_provider(model_server.anthropic_base_url), ModelRequest(messages, tools))

    assert len(model_server.requests) == 1
    body = model_server.requests[0].body
    assert model_server.requests[0].path == "/v1/messages"
    assert body["model"] == "claude-test"
    assert body["stream"] is True
    assert body["system"] == "You are Hearth.\n\nBe brief."
    assert body["max_tokens"] == 8192
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": schema}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file",
                 "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file",
                 "input": {"path": "b.txt"}},
            ],
        },
        {
            # both tool results and the next user text: one user message, roles alternate
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "contents of a",
                 "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file",
                 "is_error": True},
                {"type": "text", "text": "and now?"},
            ],
        },
    ]


def test_max_tokens_comes_from_the_request_then_the_provider(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(Reply(text="a"), Reply(text="b"))
    provider = _provider(model_server.anthropic_base_url, max_output_tokens=1000)

    _collect(provider, ModelRequest(HELLO, [], max_output_tokens=50))
    _collect(provider, ModelRequest(HELLO, []))

    assert [r.body["max_tokens"] for r in model_server.requests] == [50, 1000]
    assert "system" not in model_server.requests[0].body
    assert "tools" not in model_server.requests[0].body


def test_a_cut_stream_raises_answer_cut_off_and_never_completes(
    model_server: ScriptedModelServer,
) -> None:
    model_server.push(
        Reply(text="hello world", tool_calls=[Call("read_file", {"path": "a.txt"})], cut_after=2)
    )

    seen, error = _collect_until_error(
        _provider(model_server.anthropic_base_url), ModelRequest(HELLO, [])
    )

    assert isinstance(error, AnswerCutOff)
    assert error.sentence == (
        "The model's answer was cut off: its stream ended before the model said it was finished."
    )
    assert not [e for e in seen if isinstance(e, Completed)]
    assert all(isinstance(e, TextDelta) for e in seen)


def test_a_stream_without_a_stop_reason_is_cut_off(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello", finish_reason=None))

    seen, error = _collect_until_error(
        _provider(model_server.anthropic_base_url), ModelRequest(HELLO, [])
    )

    assert isinstance(error, AnswerCutOff)
    assert not [e for e in seen if isinstance(e, Completed)]


def test_a_broken_connection_mid_stream_is_cut_off_naming_the_model(
    model_server: ScriptedModelServer,
) -> None:
    started = threading.Event()
    model_server.push(Reply(text="hello world", stall=30.0, started=started))

    def stop_when_streaming() -> None:
        started.wait(10)
        time.sleep(0.3)  # let the headers and message_start reach the client
        model_server.stop()

    stopper = threading.Thread(target=stop_when_streaming)
    stopper.start()
    try:
        seen, error = _collect_until_error(
            _provider(model_server.anthropic_base_url), ModelRequest(HELLO, [])
        )
    finally:
        stopper.join()

    assert isinstance(error, AnswerCutOff)
    assert error.sentence.startswith(
        "The model's answer was cut off: its stream from claude broke before the model said it "
        "was finished ("
    )
    assert not [e for e in seen if isinstance(e, Completed)]
    assert error.__cause__ is not None  # the transport's own error, kept for the log


def test_an_http_error_status_is_provider_unavailable(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="never sent", status=500))

    seen, error = _collect_until_error(
        _provider(model_server.anthropic_base_url), ModelRequest(HELLO, [])
    )

    assert isinstance(error, ProviderUnavailable)
    assert error.sentence.startswith(
        f"claude answered HTTP 500 at {model_server.anthropic_base_url}/v1/messages: ")
    assert seen == []


def test_an_unreachable_endpoint_is_provider_unavailable() -> None:
    with ScriptedModelServer() as gone:
        url = gone.anthropic_base_url
    # the server is stopped: nothing listens on its port any more

    seen, error = _collect_until_error(_provider(url), ModelRequest(HELLO, []))

    assert isinstance(error, ProviderUnavailable)
    assert error.sentence.startswith(f"claude could not be reached at {url}/v1/messages: ")
    assert seen == []


def test_max_tokens_stop_maps_to_length(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="a long answer that", finish_reason="length"))

    events = _collect(_provider(model_server.anthropic_base_url), ModelRequest(HELLO, []))

    done = events[-1]
    assert isinstance(done, Completed)
    assert done.finish_reason == "length"


@pytest.mark.parametrize(
    ("wire", "normalised"),
    [("stop_sequence", "stop"), ("refusal", "refusal"), ("pause_turn", "pause_turn")],
)
def test_other_stop_reasons_normalise(
    model_server: ScriptedModelServer, wire: str, normalised: str
) -> None:
    model_server.push(Reply(text="x", finish_reason=wire))

    events = _collect(_provider(model_server.anthropic_base_url), ModelRequest(HELLO, []))

    done = events[-1]
    assert isinstance(done, Completed)
    assert done.finish_reason == normalised


def test_an_error_event_mid_stream_is_cut_off_saying_it(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello world", stream_error={"type": "overloaded_error",
                                                        "message": "Overloaded"}))

    seen, error = _collect_until_error(
        _provider(model_server.anthropic_base_url), ModelRequest(HELLO, [])
    )

    assert isinstance(error, AnswerCutOff)
    assert error.sentence.startswith(
        "The model's answer was cut off: its stream from claude broke before the model said it "
        "was finished ("
    )
    assert "Overloaded" in error.sentence
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "hello world"
    assert not [e for e in seen if isinstance(e, Completed)]


def test_a_response_format_is_sent_as_structured_output_and_json_object_never_sent(
        model_server: ScriptedModelServer) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    model_server.push(Reply(text='{"n": 3}'))
    provider = _provider(model_server.anthropic_base_url)
    wanted = ResponseFormat("json_schema", "count", schema, strict=True)
    events = _collect(provider, ModelRequest(HELLO, [], response_format=wanted))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == '{"n": 3}'
    body = model_server.requests[-1].body
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    sent = len(model_server.requests)
    seen, error = _collect_until_error(
        provider, ModelRequest(HELLO, [], response_format=ResponseFormat("json_object")))
    assert seen == [] and isinstance(error, ModelError)
    assert "json_schema" in error.sentence
    assert len(model_server.requests) == sent  # nothing was sent
