"""The OpenAI-compatible API: `POST /v1/chat/completions` (streamed and not) and
`GET /v1/models`, for OpenAI's clients (the official SDKs, and the tools built on them).

This module owns OpenAI's shapes: the request read into what the engine takes
(`engine.intake.openai_requests.Asked`), the `chat.completion` answer, the `chat.completion.chunk`
stream (ending `data: [DONE]`; `stream_options.include_usage` adds the usage chunk), and the
errors, in OpenAI's shape on every `/v1/` route (`web.http.errors`). The engine owns the rest: which
agent or model `model` names, the chat (named, or stateless), the turn, the reply.

Auth is a bearer token alone (`web.http.auth.bearer_only`, then `require_token`: never the
dashboard's cookie): the gateway's, or an app's with `send_messages` (its chats are its
own). A request names a chat with the `X-Hearth-Session` header or the `user` field; without
one it is stateless. Sampling settings (`temperature`, `max_tokens`, …) are the
model's own in Hearth and are not read; `n` above 1 and a client's own `tools` are refused (the
agent runs Hearth's tools). The last message may hold `image_url`, `input_audio` and `file`
parts besides its text: each is kept in the chat as an attachment and sent with the message
(an image URL fetched through the SSRF guard); an earlier message holds text alone. A
stream waiting (a tool running, a call waiting on the owner) sends an SSE comment every
`KEEPALIVE_SECONDS`, which
OpenAI's clients skip. An error once the stream has begun is its last event (`data: {"error":
…}`), which OpenAI's clients raise. A turn that ended without an answer says `x-should-retry:
false`: the message was admitted, and a client's retry would send it again.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from hearth.engine.intake import openai_requests
from hearth.engine.intake.openai_requests import (
    Asked,
    Exchange,
    Piece,
    Reply,
    Said,
    Text,
    TurnFailed,
    Upload,
)
from hearth.errors import Refusal
from hearth.sessions.naming import NAME_PATTERN, name_part
from hearth.web.http.auth import bearer_only, require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.errors import openai_envelope, openai_error
from hearth.web.http.permissions import PrincipalDep

router = APIRouter(dependencies=[Depends(bearer_only), Depends(require_token)])
KEEPALIVE_SECONDS = 15.0
KEEPALIVE = ": keepalive\n\n"
CREATED = int(time.time())  # the models' `created`: when this gateway started
NAME_SENTENCE = ("names a Hearth chat: 1 to 128 letters, digits, '.', '_', ':' or '-', starting "
                 "with a letter or digit")


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: StrictStr | list[ContentPart] | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool | None = None


class ChatRequest(BaseModel):
    """What is read of a request; any other field OpenAI defines is accepted and not read."""

    model_config = ConfigDict(extra="allow")
    model: StrictStr = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None
    user: StrictStr | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None


def _invalid(param: str | None, sentence: str, code: str = "invalid_request") -> Refusal:
    return Refusal(code, 400, sentence, details={"param": param})


@router.get("/v1/models")
async def list_models(engine: EngineDep) -> dict[str, Any]:
    """`hearth` (the default agent), each agent set up, each model id set up."""
    return {"object": "list",
            "data": [{"id": name, "object": "model", "created": CREATED, "owned_by": "hearth"}
                     for name in openai_requests.model_names(engine)]}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatRequest, engine: EngineDep, principal: PrincipalDep,
    session: Annotated[str | None, Header(alias="X-Hearth-Session")] = None,
) -> Response:
    chat, history, text, files = _read(body, session, principal.app)
    asked = Asked(openai_requests.resolve(engine, body.model), chat, history, text, principal,
                  files)
    exchange = await openai_requests.begin(engine, asked)
    headers = {"X-Hearth-Run": exchange.run_id}
    if not exchange.stateless:
        headers["X-Hearth-Session"] = exchange.key
    if body.stream:
        return await _streamed(exchange, body, headers)
    try:
        reply = await exchange.reply()
    except TurnFailed as failed:
        await exchange.close()
        return _failed(failed)
    except BaseException:
        exchange.close_soon()
        raise
    await exchange.close()  # a stateless request's chat is forgotten before it is answered
    return JSONResponse(_completion(exchange, body.model, reply), headers=headers)


def _read(body: ChatRequest, header: str | None, app: str | None
          ) -> tuple[str | None, tuple[Said, ...], str, tuple[Upload, ...]]:
    """The chat named, the earlier messages (a stateless request's context), the last one's
    text and its files."""
    if body.n is not None and body.n != 1:
        raise _invalid("n", "Hearth writes one answer per request; n must be 1.")
    for name in ("tools", "functions"):
        if getattr(body, name):
            raise _invalid(name, f"Hearth's agent runs Hearth's own tools; a request's {name} "
                                 "are not supported. Send the request without them.")
    chat = _chat_named(header, body.user, app)
    last = body.messages[-1]
    if last.role != "user":
        raise _invalid("messages", "The last message must be the user's (role 'user'): it is "
                                   "the message Hearth sends.")
    text, files = _parts_of(len(body.messages) - 1, last)
    if not text.strip() and not files:
        raise _invalid("messages", "The last message is empty; write something to send.",
                       "empty_message")
    history: tuple[Said, ...] = ()
    if chat is None:  # stateless: the earlier messages are the context
        history = tuple(_context(index, message)
                        for index, message in enumerate(body.messages[:-1]))
    return chat, tuple(said for said in history if said.text), text, files


def _chat_named(header: str | None, user: str | None, app: str | None) -> str | None:
    """The chat the request names: the header, else `user` (both: the same one); an app's
    names are its own (`naming.key_for`), so it may also give back the key it was handed."""
    if header is not None and user is not None and header != user:
        raise _invalid("user", "X-Hearth-Session and user name two different chats; send one.")
    for name, param in ((header, None), (user, "user")):
        if name is None:
            continue
        if not NAME_PATTERN.match(name_part(name, app)):
            where = "user" if param else "X-Hearth-Session"
            raise _invalid(param, f"{where} {NAME_SENTENCE}; {name[:100]!r} is not one.",
                           "invalid_name")
        return name
    return None


def _context(index: int, message: ChatMessage) -> Said:
    """A stateless request's earlier message; a client's tool calls and results are refused
    (Hearth's agent runs its own tools)."""
    if message.role in ("tool", "function") or message.tool_calls or message.function_call:
        raise _invalid(f"messages.{index}",
                       "Tool calls and tool results of a client's own tools are not supported: "
                       "Hearth's agent runs Hearth's tools. Send the conversation's text only.")
    role = "system" if message.role in ("system", "developer") else message.role
    return Said(role, _text_of(index, message))


def _parts_of(index: int, message: ChatMessage) -> tuple[str, tuple[Upload, ...]]:
    """The last message's text and its files: `image_url` parts (a data URL, or an http(s)
    URL the gateway fetches through its SSRF guard), `input_audio` and `file` parts (their
    bytes in base64). Each is kept in the chat as an attachment (see the README)."""
    content = message.content
    if content is None or isinstance(content, str):
        return _text_of(index, message), ()
    files: list[Upload] = []
    for number, part in enumerate(content):
        if part.type != "text":
            files.append(_upload(f"messages.{index}.content.{number}", part, len(files) + 1))
    texts = [part for part in content if part.type == "text"]
    return _text_of(index, message.model_copy(update={"content": texts})), tuple(files)


def _upload(param: str, part: ContentPart, number: int) -> Upload:
    """One file part of the last message, read (or its URL taken) as OpenAI defines it."""
    extra = part.model_extra or {}
    if part.type == "image_url":
        url = str((extra.get("image_url") or {}).get("url", ""))
        if url.startswith(("http://", "https://")):
            return Upload(f"image-{number}", url=url)
        return Upload(f"image-{number}", data=_data_url(param, url))
    if part.type == "input_audio":
        audio = extra.get("input_audio") or {}
        kind = str(audio.get("format", "wav"))[:10]
        return Upload(f"audio-{number}.{kind}", data=_base64(param, audio.get("data")))
    if part.type == "file":
        file = extra.get("file") or {}
        data = str(file.get("file_data", ""))
        name = str(file.get("filename") or f"file-{number}")
        return Upload(name, data=_data_url(param, data) if data.startswith("data:")
                      else _base64(param, data))
    raise _invalid(param, f"Hearth reads text, image_url, input_audio and file parts; a "
                          f"{part.type!r} part is not supported.")


def _data_url(param: str, url: str) -> bytes:
    head, comma, data = url.partition(",")
    if not (url.startswith("data:") and comma and head.endswith(";base64")):
        raise _invalid(param, "An image must be an http(s) URL or a base64 data URL "
                              "(data:image/png;base64,…).")
    return _base64(param, data)


def _base64(param: str, data: object) -> bytes:
    try:
        decoded = base64.b64decode(str(data or ""), validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(param, "The file's data is not valid base64.") from None
    if not decoded:
        raise _invalid(param, "The file's data is empty.")
    return decoded


def _text_of(index: int, message: ChatMessage) -> str:
    """A message's text: its content, or its text parts joined; any other part is refused
    (files are read in the last message alone)."""
    content = message.content
    if content is None or isinstance(content, str):
        text = content or ""
    else:
        for part in content:
            if part.type != "text" or part.text is None:
                raise _invalid(f"messages.{index}.content",
                               f"Hearth reads a {part.type!r} part in the last message only; "
                               "an earlier message may hold text alone.")
        text = "\n".join(part.text or "" for part in content)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"messages.{index}.content",
                       "The message holds characters that are not valid Unicode text (a lone "
                       "surrogate).") from None
    return text


def _failed(failed: TurnFailed) -> JSONResponse:
    """A turn that ended without an answer: its ending and sentence, never to be retried by
    the client on its own (past a spending limit, 429 with when it resets: `Retry-After`)."""
    headers = {"x-should-retry": "false"}
    if failed.retry_after is not None:
        headers["Retry-After"] = str(failed.retry_after)
    return openai_envelope(failed.status, failed.code, failed.sentence, headers=headers)


def _completion(exchange: Exchange, model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": _completion_id(exchange), "object": "chat.completion", "created": int(time.time()),
        "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "logprobs": None, "finish_reason": reply.finish_reason,
                     "message": {"role": "assistant", "content": reply.content,
                                 "refusal": None}}],
        "usage": _usage(reply),
    }


def _completion_id(exchange: Exchange) -> str:
    return "chatcmpl-" + exchange.run_id.removeprefix("run_")


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
            "total_tokens": reply.usage.total_tokens}


async def _streamed(exchange: Exchange, body: ChatRequest,
                    headers: dict[str, str]) -> Response:
    """The answer as `chat.completion.chunk` events. The stream begins at the turn's first
    text (or after a keep-alive's wait): a turn that fails before it is answered with its
    HTTP status, as a request that is not streamed is."""
    pieces = exchange.pieces(KEEPALIVE_SECONDS)
    try:
        first = await anext(pieces)
    except TurnFailed as failed:
        await exchange.close()
        return _failed(failed)
    except BaseException:
        exchange.close_soon()
        raise
    chunks = _Chunks(_completion_id(exchange), body.model,
                     bool(body.stream_options and body.stream_options.include_usage))
    return StreamingResponse(
        _events(exchange, chunks, first, pieces), media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _events(exchange: Exchange, chunks: _Chunks, first: Piece,
                  pieces: AsyncGenerator[Piece, None]) -> AsyncIterator[str]:
    try:
        yield chunks.event({"role": "assistant", "content": "", "refusal": None})
        piece = first
        while not isinstance(piece, Reply):
            if isinstance(piece, Text):
                yield chunks.event({"content": piece.text})
            else:
                yield KEEPALIVE  # a comment: OpenAI's clients skip it
            piece = await anext(pieces)
        await exchange.close()
        for event in chunks.ending(piece):
            yield event
    except TurnFailed as failed:
        await exchange.close()
        yield _data(openai_error(failed.status, failed.code, failed.sentence))
    finally:
        exchange.close_soon()  # a stream cut short (the client left): nothing if closed
        await pieces.aclose()


class _Chunks:
    """The `chat.completion.chunk` events of one answer."""

    def __init__(self, completion_id: str, model: str, include_usage: bool) -> None:
        self.id = completion_id
        self.model = model
        self.created = int(time.time())
        self.include_usage = include_usage

    def event(self, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        return _data(self._chunk([{"index": 0, "delta": delta, "logprobs": None,
                                   "finish_reason": finish_reason}]))

    def ending(self, reply: Reply) -> list[str]:
        """The finish chunk, the usage chunk when asked for, and `[DONE]`."""
        events = [self.event({}, reply.finish_reason)]
        if self.include_usage:
            events.append(_data({**self._chunk([]), "usage": _usage(reply)}))
        return [*events, "data: [DONE]\n\n"]

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk",
                                 "created": self.created, "model": self.model,
                                 "system_fingerprint": None, "choices": choices}
        if self.include_usage:
            chunk["usage"] = None
        return chunk


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"
