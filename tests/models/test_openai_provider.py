"""The OpenAI-compatible adapter against the scripted fake model server, over real HTTP on
loopback.

The official `openai` SDK talks to `ScriptedModelServer`'s chat-completions endpoint
unmodified; the tests pin down the events the adapter makes of the streamed answer (text,
tool calls, usage, finish reasons), including the cut-off, failed and unreachable cases.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from hearth.models.openai_compat import OpenAICompatProvider
from hearth.models.types import (
    AnswerCutOff,
    Completed,
    Message,
    ModelRequest,
    ProviderUnavailable,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

HELLO = [Message(role="user", text="hi")]


def _provider(base_url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider(model_id="local", model_name="gpt-test", base_url=base_url,
                                api_key="test", timeout=10.0)


def _collect_until_error(provider: OpenAICompatProvider, request: ModelRequest
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


def _collect(provider: OpenAICompatProvider, request: ModelRequest) -> list[StreamEvent]:
    seen, error = _collect_until_error(provider, request)
    assert error is None, error
    return seen


def test_streamed_text_reassembles_and_completes_with_stop_and_usage(
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello world, how are you", usage=(12, 5)))

    events = _collect(_provider(model_server.openai_base_url), ModelRequest(HELLO, []))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1  # really streamed in pieces
    assert "".join(d.text for d in deltas) == "hello world, how are you"
    assert [e for e in events if isinstance(e, Completed)] == [events[-1]]
    assert events[-1] == Completed(finish_reason="stop", tool_calls=(), usage=Usage(12, 5),
                                   model="gpt-test")


def test_two_tool_calls_reassemble_with_their_arguments(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Let me look.", usage=(20, 9), tool_calls=[
        Call("read_file", {"path": "a.txt"}, id="call_a"),
        Call("search", {"q": "hearth", "limit": 3}, id="call_b")]))

    events = _collect(_provider(model_server.openai_base_url), ModelRequest(HELLO, []))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."
    done = events[-1]
    assert isinstance(done, Completed)
    assert done.finish_reason == "tool_calls" and done.usage == Usage(20, 9)
    assert done.tool_calls == (
        ToolCall(call_id="call_a", name="read_file", arguments={"path": "a.txt"}),
        ToolCall(call_id="call_b", name="search", arguments={"q": "hearth", "limit": 3}),
    )


def test_invalid_tool_json_is_kept_raw(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("read_file", '{"path": "a.t', id="call_9")]))

    done = _collect(_provider(model_server.openai_base_url), ModelRequest(HELLO, []))[-1]

    assert isinstance(done, Completed)
    assert done.tool_calls == (ToolCall(call_id="call_9", name="read_file",
                                        arguments={"_invalid_json": '{"path": "a.t'}),)


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_other_finish_reasons_are_passed_on(model_server: ScriptedModelServer, reason: str) -> None:
    model_server.push(Reply(text="a long answer that", finish_reason=reason))

    done = _collect(_provider(model_server.openai_base_url), ModelRequest(HELLO, []))[-1]

    assert isinstance(done, Completed) and done.finish_reason == reason


def test_a_cut_stream_raises_answer_cut_off_and_never_completes(
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello world", tool_calls=[Call("read_file", {"path": "a"})],
                      cut_after=2))

    seen, error = _collect_until_error(_provider(model_server.openai_base_url),
                                       ModelRequest(HELLO, []))

    assert isinstance(error, AnswerCutOff)
    assert error.sentence == ("The model's answer was cut off: its stream ended before the "
                              "model said it was finished.")
    assert seen and all(isinstance(e, TextDelta) for e in seen)


def test_a_stream_without_a_finish_reason_is_cut_off(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello", finish_reason=None))

    seen, error = _collect_until_error(_provider(model_server.openai_base_url),
                                       ModelRequest(HELLO, []))

    assert isinstance(error, AnswerCutOff)
    assert not [e for e in seen if isinstance(e, Completed)]


def test_an_error_chunk_mid_stream_is_cut_off_saying_it(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="hello world", stream_error={"message": "the server overloaded",
                                                        "type": "server_error"}))

    seen, error = _collect_until_error(_provider(model_server.openai_base_url),
                                       ModelRequest(HELLO, []))

    assert isinstance(error, AnswerCutOff)
    assert error.sentence.startswith(
        "The model's answer was cut off: its stream from local broke before the model said "
        "it was finished (")
    assert "the server overloaded" in error.sentence
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "hello world"
    assert not [e for e in seen if isinstance(e, Completed)]


def test_a_broken_connection_mid_stream_is_cut_off_naming_the_model(
        model_server: ScriptedModelServer) -> None:
    started = threading.Event()
    model_server.push(Reply(text="hello world", stall=30.0, started=started))

    def stop_when_streaming() -> None:
        started.wait(10)
        time.sleep(0.3)  # let the headers and the first chunk reach the client
        model_server.stop()

    stopper = threading.Thread(target=stop_when_streaming)
    stopper.start()
    try:
        seen, error = _collect_until_error(_provider(model_server.openai_base_url),
                                           ModelRequest(HELLO, []))
    finally:
        stopper.join()

    assert isinstance(error, AnswerCutOff)
    assert error.sentence.startswith(
        "The model's answer was cut off: its stream from local broke before the model said it "
        "was finished (")
    assert error.__cause__ is not None  # the transport's own error, kept for the log
    assert not [e for e in seen if isinstance(e, Completed)]


def test_an_http_error_status_is_provider_unavailable(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="never sent", status=500))

    seen, error = _collect_until_error(_provider(model_server.openai_base_url),
                                       ModelRequest(HELLO, []))

    assert isinstance(error, ProviderUnavailable) and error.status == 500
    assert error.sentence.startswith(
        f"local answered HTTP 500 at {model_server.openai_base_url}/chat/completions: ")
    assert seen == []


def test_an_unreachable_endpoint_is_provider_unavailable() -> None:
    with ScriptedModelServer() as gone:
        url = gone.openai_base_url

    seen, error = _collect_until_error(_provider(url), ModelRequest(HELLO, []))

    assert isinstance(error, ProviderUnavailable)
    assert error.sentence.startswith(f"local could not be reached at {url}/chat/completions: ")
    assert seen == []

