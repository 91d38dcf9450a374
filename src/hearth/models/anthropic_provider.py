"""The Anthropic Messages adapter on the official SDK.

Translates the neutral messages to Anthropic's shape (system messages joined into `system`,
tool results as `tool_result` blocks of a user message, consecutive same-role messages merged so
roles alternate), streams the raw Messages events, reassembles tool calls from their
`input_json_delta` pieces and reads usage from `message_start` and `message_delta`. An answer is
finished only at `message_stop` after a `stop_reason`: a stream that ends before that raises
AnswerCutOff, and nothing of a cut answer's tool calls is emitted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    TextDelta as WireTextDelta,
    ToolUseBlock,
)

from hearth.models.body import as_body
from hearth.models.provider_common import (
    SdkErrors,
    anthropic_not_found_hint,
    request_error,
    stream_broke,
    stream_unfinished,
    tool_arguments,
)
from hearth.models.types import (
    Completed,
    Message,
    ModelRequest,
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
        anthropic.APIError, httpx.HTTPError, httpx2.HTTPError,
    )
except ImportError:  # pragma: no cover - depends on the installed SDK
    _STREAM_ERRORS = (anthropic.APIError, httpx.HTTPError)

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
        try:
            stream = await self._client.messages.create(**as_body(kwargs))
        except anthropic.APIError as exc:
            raise request_error(self.model_id, exc, _SDK_ERRORS, self._not_found_hint) from exc
        async for event in self._read(stream):
            yield event

    async def _read(
        self, stream: anthropic.AsyncStream[RawMessageStreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        stopped = False
        tokens_in = 0
        tokens_out = 0
        model = self.model_name
        try:
            async for event in stream:
                if isinstance(event, RawMessageStartEvent):
                    model = event.message.model or model
                    tokens_in = event.message.usage.input_tokens or 0
                    tokens_out = event.message.usage.output_tokens or 0
                elif isinstance(event, RawContentBlockStartEvent):
                    block = event.content_block
                    if isinstance(block, ToolUseBlock):
                        calls[event.index] = {
                            "id": block.id, "name": block.name, "args": "", "input": block.input,
                        }
                elif isinstance(event, RawContentBlockDeltaEvent):
                    delta = event.delta
                    if isinstance(delta, WireTextDelta):
                        if delta.text:
                            yield TextDelta(delta.text)
                    elif isinstance(delta, InputJSONDelta):
                        slot = calls.setdefault(
                            event.index, {"id": "", "name": "", "args": "", "input": None}
                        )
                        slot["args"] += delta.partial_json or ""
                elif isinstance(event, RawMessageDeltaEvent):
                    finish = event.delta.stop_reason or finish
                    if event.usage.input_tokens is not None:
                        tokens_in = event.usage.input_tokens
                    tokens_out = event.usage.output_tokens or tokens_out
                elif isinstance(event, RawMessageStopEvent):
                    stopped = True
                    break
        except _STREAM_ERRORS as exc:
            raise stream_broke(self.model_id, exc) from exc
        finally:
            await stream.close()
        if not stopped or finish is None:
            raise stream_unfinished()
        tool_calls = tuple(_tool_call(index, slot) for index, slot in sorted(calls.items()))
        yield Completed(
            finish_reason=_FINISH_REASONS.get(finish, finish),
            tool_calls=tool_calls,
            usage=Usage(tokens_in, tokens_out),
            model=model,
        )


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
    blocks: list[dict[str, Any]] = []
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    if message.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        )
    return blocks
