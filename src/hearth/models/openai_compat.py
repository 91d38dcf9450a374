"""The OpenAI-compatible adapter (OpenAI, Ollama, vLLM, LM Studio…) on the official SDK.

Streams chat completions, reassembles tool calls from their deltas, reads usage from the
final chunk. An answer is finished only when a choice carries a finish_reason: a stream that
ends without one raises AnswerCutOff, and nothing of a cut answer's tool calls is emitted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from hearth.models.body import as_body
from hearth.models.provider_common import (
    SdkErrors,
    openai_not_found_hint,
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

_SDK_ERRORS = SdkErrors(status=openai.APIStatusError, connection=openai.APIConnectionError)


class OpenAICompatProvider:
    provider = "openai"

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
        self._not_found_hint = openai_not_found_hint(base_url)
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,  # always given: the SDK would read its own variable for None
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=10.0),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": [to_wire(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description,
                                 "parameters": t.parameters},
                }
                for t in request.tools
            ]
        cap = request.max_output_tokens or self.max_output_tokens
        if cap:
            kwargs["max_tokens"] = cap
        try:
            stream = await self._client.chat.completions.create(**as_body(kwargs))
        except openai.APIError as exc:
            raise request_error(self.model_id, exc, _SDK_ERRORS, self._not_found_hint) from exc
        async for event in self._read(stream):
            yield event

    async def _read(self, stream: Any) -> AsyncIterator[StreamEvent]:
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage = Usage()
        model = self.model_name
        try:
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = Usage(chunk.usage.prompt_tokens or 0,
                                  chunk.usage.completion_tokens or 0)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        yield TextDelta(delta.content)
                    for piece in (delta.tool_calls or []) if delta is not None else []:
                        slot = calls.setdefault(piece.index, {"id": "", "name": "", "args": ""})
                        slot["id"] = piece.id or slot["id"]
                        if piece.function is not None:
                            slot["name"] += piece.function.name or ""
                            slot["args"] += piece.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except (openai.APIError, httpx2.HTTPError) as exc:  # the SDK's transport is httpx2
            raise stream_broke(self.model_id, exc) from exc
        finally:
            await stream.close()
        if finish is None:
            raise stream_unfinished()
        tool_calls = tuple(_tool_call(index, slot) for index, slot in sorted(calls.items()))
        yield Completed(finish_reason=finish, tool_calls=tool_calls, usage=usage, model=model)


def _tool_call(index: int, slot: dict[str, str]) -> ToolCall:
    arguments = tool_arguments(slot["args"].strip() or "{}")
    return ToolCall(call_id=slot["id"] or f"call_{index}", name=slot["name"], arguments=arguments)


def to_wire(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    wire: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
        if not message.text:
            wire["content"] = None
    return wire
