"""The OpenAI-compatible adapter (OpenAI, Ollama, vLLM, LM Studio…) on the official SDK.

Streams chat completions, reassembles tool calls from their deltas, reads usage from the
final chunk. An answer is finished only when a choice carries a finish_reason: a stream that
ends without one raises AnswerCutOff, and nothing of a cut answer's tool calls is emitted. A
request's response format is sent as OpenAI's clients send it (`response_format`).

The SDK builds and sends the request and maps its failures; its answer is taken raw
(`with_streaming_response`) and each chunk read as plain JSON (`models.sse`), not made into
the SDK's typed chunk objects: that construction was most of a call's CPU (bench/provider.py).
A chunk carrying an `error` breaks the stream as the SDK's own reader would (`openai.APIError`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import openai

from hearth.models import sse
from hearth.models.audio import Heard
from hearth.models.body import as_body
from hearth.models.provider_common import (
    SdkErrors,
    model_names,
    openai_not_found_hint,
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

    async def transcribe(self, name: str, data: bytes, content_type: str) -> Heard:
        """The words of an audio file (`/audio/transcriptions`), and the seconds billed when
        the server says (`usage` of type `duration`); ModelError when the server refuses or
        cannot be reached."""
        try:
            said = await self._client.audio.transcriptions.create(
                model=self.model_name, file=(name, data, content_type))
        except openai.APIStatusError as error:
            raise ModelError(f"{self.model_id} could not transcribe the audio "
                             f"(HTTP {error.status_code}).") from None
        except openai.APIConnectionError:
            raise ModelError(f"{self.model_id} could not be reached to transcribe the "
                             "audio.") from None
        return Heard(str(getattr(said, "text", "") or ""), _seconds(getattr(said, "usage", None)))

    async def speak(self, text: str, voice: str = "alloy") -> bytes:
        """`text` read aloud (`/audio/speech`), as MP3; ModelError when it cannot be."""
        try:
            said = await self._client.audio.speech.create(model=self.model_name, voice=voice,
                                                          input=text, response_format="mp3")
        except openai.APIStatusError as error:
            raise ModelError(f"{self.model_id} could not read the text aloud "
                             f"(HTTP {error.status_code}).") from None
        except openai.APIConnectionError:
            raise ModelError(f"{self.model_id} could not be reached to read aloud.") from None
        return bytes(said.content)

    async def listed(self) -> list[str]:
        """The names of the models the endpoint offers (`GET /models`, every page); a
        ModelError when it cannot be reached, refuses, or answers no list."""
        try:
            return await model_names(self.model_id, aiter(self._client.models.list()))
        except openai.APIError as exc:
            raise request_error(self.model_id, exc, _SDK_ERRORS,
                                self._not_found_hint) from exc

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
        if request.response_format is not None:  # as the client asked it of Hearth
            kwargs["response_format"] = request.response_format.as_openai()
        async with AsyncExitStack() as opened:
            try:
                response = await opened.enter_async_context(
                    self._client.chat.completions.with_streaming_response.create(
                        **as_body(kwargs)))
            except openai.APIError as exc:
                raise request_error(self.model_id, exc, _SDK_ERRORS,
                                    self._not_found_hint) from exc
            async for event in self._read(response):
                yield event

    async def _read(self, response: Any) -> AsyncIterator[StreamEvent]:
        answer = _Answer(self.model_name)
        try:
            async for event in sse.events(response.iter_lines()):
                if event.data.startswith("[DONE]"):
                    continue  # read on to the end, so the connection can be used again
                for text in answer.take(_chunk(event.data, response)):
                    yield TextDelta(text)
        except (openai.APIError, httpx2.HTTPError, ValueError) as exc:  # transport: httpx2
            raise stream_broke(self.model_id, exc) from exc
        yield answer.completed()


class _Answer:
    """An answer as its chunks arrive: the model that wrote it, its usage, its finish
    reason and its tool calls' pieces."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.usage = Usage()
        self.finish: str | None = None
        self.calls: dict[int, dict[str, str]] = {}

    def take(self, chunk: dict[str, Any]) -> list[str]:
        """Read one chunk: the text it adds."""
        self.model = _text(chunk.get("model")) or self.model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = Usage(usage.get("prompt_tokens") or 0,
                               usage.get("completion_tokens") or 0)
        texts: list[str] = []
        for choice in _dicts(chunk.get("choices")):
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = _text(delta.get("content"))
                if content:
                    texts.append(content)
                for piece in _dicts(delta.get("tool_calls")):
                    self._piece(piece)
            self.finish = _text(choice.get("finish_reason")) or self.finish
        return texts

    def _piece(self, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        slot = self.calls.setdefault(index if isinstance(index, int) else 0,
                                     {"id": "", "name": "", "args": ""})
        slot["id"] = _text(piece.get("id")) or slot["id"]
        function = piece.get("function")
        if isinstance(function, dict):
            slot["name"] += _text(function.get("name"))
            slot["args"] += _text(function.get("arguments"))

    def completed(self) -> Completed:
        if self.finish is None:
            raise stream_unfinished()
        tool_calls = tuple(_tool_call(index, slot) for index, slot in sorted(self.calls.items()))
        return Completed(finish_reason=self.finish, tool_calls=tool_calls, usage=self.usage,
                         model=self.model)


def _chunk(data: str, response: Any) -> dict[str, Any]:
    """One chunk's JSON; a chunk that says `error` raises it as the SDK's reader does."""
    chunk = json.loads(data)
    if not isinstance(chunk, dict):
        return {}
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        raise openai.APIError(message if isinstance(message, str) and message
                              else "An error occurred during streaming",
                              request=response.http_response.request, body=error)
    return chunk


def _seconds(usage: object) -> float | None:
    """The seconds a transcription's `usage` says were billed (None: it says none)."""
    seconds = getattr(usage, "seconds", None)
    if getattr(usage, "type", None) != "duration" or not isinstance(seconds, (int, float)):
        return None
    return float(seconds) if seconds >= 0 else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _tool_call(index: int, slot: dict[str, str]) -> ToolCall:
    arguments = tool_arguments(slot["args"].strip() or "{}")
    return ToolCall(call_id=slot["id"] or f"call_{index}", name=slot["name"], arguments=arguments)


def to_wire(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    wire: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.images:  # content parts: the text, then each image as a data URL
        wire["content"] = [{"type": "text", "text": message.text}, *(
            {"type": "image_url",
             "image_url": {"url": f"data:{image.media_type};base64,{image.data}"}}
            for image in message.images)]
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
