"""The Anthropic Messages adapter on the official SDK.

Translates the neutral messages to Anthropic's shape (system messages joined into `system`,
tool results as `tool_result` blocks of a user message, consecutive same-role messages merged so
roles alternate), streams the raw Messages events, reassembles tool calls from their
`input_json_delta` pieces and reads usage from `message_start` and `message_delta`. An answer is
finished only at `message_stop` after a `stop_reason`: a stream that ends before that raises
AnswerCutOff, and nothing of a cut answer's tool calls is emitted. A request's response format
with a JSON schema is sent as Anthropic's structured output (`output_config.format`); one
without (`json_object`) is refused before anything is sent.

The SDK builds and sends the request and maps its failures; its answer is taken raw
(`with_streaming_response`) and each event read as plain JSON (`models.sse`), not made into
the SDK's typed event objects (bench/provider.py measures both). An `error` event breaks the
stream as the SDK's own reader would (`anthropic.APIStatusError`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anthropic
import httpx

from hearth.models import sse
from hearth.models.body import as_body
from hearth.models.provider_common import (
    SdkErrors,
    anthropic_not_found_hint,
    model_names,
    request_error,
    stream_broke,
    stream_unfinished,
    tool_arguments,
)
from hearth.models.types import (
    Completed,
    Message,
    ModelError,
    ModelRequest,
    ResponseFormat,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

# What can break a stream while it is read. anthropic 2.x talks over the `httpx2` fork and lets
# its transport errors through un-wrapped; earlier releases use `httpx` itself.
try:
    import httpx2

    _STREAM_ERRORS: tuple[type[Exception], ...] = (
        anthropic.APIError, httpx.HTTPError, httpx2.HTTPError, ValueError,
    )
except ImportError:  # pragma: no cover - depends on the installed SDK
    _STREAM_ERRORS = (anthropic.APIError, httpx.HTTPError, ValueError)

_SDK_ERRORS = SdkErrors(status=anthropic.APIStatusError, connection=anthropic.APIConnectionError)

DEFAULT_MAX_TOKENS = 8192

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
}


class AnthropicProvider:
    provider = "anthropic"

    def __init__(
        self,
        *,
        model_id: str,
        model_name: str,
        base_url: str | None,
        api_key: str,
        max_output_tokens: int | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.model_id = model_id
        self.model_name = model_name
        self.max_output_tokens = max_output_tokens
        self._not_found_hint = anthropic_not_found_hint(base_url)
        self._client = anthropic.AsyncAnthropic(
            base_url=base_url,
            api_key=api_key,  # always given: the SDK would read its own variable for None
            max_retries=0,
            # the SDK's own Timeout class: 2.x rejects `httpx.Timeout` (it is built on httpx2)
            timeout=anthropic.Timeout(timeout, connect=10.0),
        )

    async def listed(self) -> list[str]:
        """The names of the models the endpoint offers (`GET /models`, every page); a
        ModelError when it cannot be reached, refuses, or answers no list."""
        try:
            return await model_names(self.model_id, aiter(self._client.models.list(limit=100)))
        except anthropic.APIError as exc:
            raise request_error(self.model_id, exc, _SDK_ERRORS,
                                self._not_found_hint) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        system, messages = to_wire(request.messages)
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "max_tokens": request.max_output_tokens or self.max_output_tokens
            or DEFAULT_MAX_TOKENS,
            "stream": True,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if request.response_format is not None:
            kwargs["output_config"] = {"format": _output_format(self.model_id,
                                                                request.response_format)}
        async with AsyncExitStack() as opened:
            try:
                response = await opened.enter_async_context(
                    self._client.messages.with_streaming_response.create(**as_body(kwargs)))
            except anthropic.APIError as exc:
                raise request_error(self.model_id, exc, _SDK_ERRORS,
                                    self._not_found_hint) from exc
            async for event in self._read(response):
                yield event

    async def _read(self, response: Any) -> AsyncIterator[StreamEvent]:
        answer = _Answer(self.model_name)
        try:
            async for event in sse.events(response.iter_lines()):
                if event.name == "error":
                    raise _error_event(event.data, response)
                if event.name in ("", "ping") or not event.data:
                    continue  # as the SDK's reader: unnamed events and pings say nothing
                text = answer.take(event.name, json.loads(event.data))
                if text:
                    yield TextDelta(text)
                if answer.stopped:
                    break
        except _STREAM_ERRORS as exc:
            raise stream_broke(self.model_id, exc) from exc
        yield answer.completed()


class _Answer:
    """An answer as its events arrive: the model that wrote it, its usage, its stop reason,
    whether `message_stop` came, and its tool calls' pieces."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.tokens_in = 0
        self.tokens_out = 0
        self.finish: str | None = None
        self.stopped = False
        self.calls: dict[int, dict[str, Any]] = {}

    def take(self, name: str, data: object) -> str:
        """Read one event: the text it adds."""
        event = data if isinstance(data, dict) else {}
        if name == "message_start":
            message = _dict(event.get("message"))
            self.model = _text(message.get("model")) or self.model
            usage = _dict(message.get("usage"))
            self.tokens_in = usage.get("input_tokens") or 0
            self.tokens_out = usage.get("output_tokens") or 0
        elif name == "content_block_start":
            block = _dict(event.get("content_block"))
            if block.get("type") == "tool_use":
                self.calls[_index(event)] = {"id": _text(block.get("id")),
                                             "name": _text(block.get("name")), "args": "",
                                             "input": block.get("input")}
        elif name == "content_block_delta":
            return self._delta(event)
        elif name == "message_delta":
            self.finish = _text(_dict(event.get("delta")).get("stop_reason")) or self.finish
            usage = _dict(event.get("usage"))
            if usage.get("input_tokens") is not None:
                self.tokens_in = usage["input_tokens"]
            self.tokens_out = usage.get("output_tokens") or self.tokens_out
        elif name == "message_stop":
            self.stopped = True
        return ""

    def _delta(self, event: dict[str, Any]) -> str:
        delta = _dict(event.get("delta"))
        if delta.get("type") == "text_delta":
            return _text(delta.get("text"))
        if delta.get("type") == "input_json_delta":
            slot = self.calls.setdefault(_index(event),
                                         {"id": "", "name": "", "args": "", "input": None})
            slot["args"] += _text(delta.get("partial_json"))
        return ""

    def completed(self) -> Completed:
        if not self.stopped or self.finish is None:
            raise stream_unfinished()
        tool_calls = tuple(_tool_call(index, slot) for index, slot in sorted(self.calls.items()))
        return Completed(finish_reason=_FINISH_REASONS.get(self.finish, self.finish),
                         tool_calls=tool_calls, usage=Usage(self.tokens_in, self.tokens_out),
                         model=self.model)


def _output_format(model_id: str, wanted: ResponseFormat) -> dict[str, Any]:
    """A `response_format` as Anthropic's structured output (`output_config.format`): its
    JSON schema; ModelError, nothing sent, for a format with none (`json_object`)."""
    problem = wanted.problem_with("anthropic")
    if problem is not None or wanted.schema is None:
        raise ModelError(f"{model_id} {problem}.")
    return {"type": "json_schema", "schema": wanted.schema}


def _error_event(data: str, response: Any) -> anthropic.APIStatusError:
    """An `error` event as the SDK's reader raises it: its body in the message."""
    try:
        body: object = json.loads(data)
        message = f"{body}"
    except ValueError:
        body, message = data, data or f"Error code: {response.status_code}"
    return anthropic.APIStatusError(message, response=response.http_response, body=body)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else 0


def _tool_call(index: int, slot: dict[str, Any]) -> ToolCall:
    raw = str(slot["args"]).strip()
    if not raw:
        # No input_json_delta pieces: the block's own `input` (usually {}) is the arguments.
        start = slot.get("input")
        arguments: Any = start if isinstance(start, dict) else {}
    else:
        arguments = tool_arguments(raw)
    return ToolCall(
        call_id=slot["id"] or f"call_{index}", name=slot["name"], arguments=arguments
    )


def to_wire(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The `system` text and the alternating-role Anthropic messages for `messages`."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                system.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return "\n\n".join(system), wire


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.text,
                "is_error": message.is_error,
            }
        ]
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                     "data": image.data}}
        for image in message.images]  # images first, as Anthropic advises
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    if message.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        )
    return blocks
