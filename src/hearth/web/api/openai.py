"""The OpenAI-compatible API: `POST /v1/chat/completions` (streamed and not), `GET /v1/models`
and `GET /v1/models/{id}`, for OpenAI's clients (the official SDKs, and the tools built on
them).

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
false`: the message was admitted, and a client's retry would send it again. A request with
an `Idempotency-Key` header sent again is answered by the run the first one admitted
(`engine.intake.repeats`), never admitted twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, Response, StreamingResponse

from hearth.engine.intake import openai_requests
from hearth.engine.intake.openai_requests import (
    Asked,
    Exchange,
    Piece,
    Reply,
    Text,
    TurnFailed,
)
from hearth.web.api import openai_shapes as shapes
from hearth.web.api.openai_shapes import ChatRequest
from hearth.web.http.auth import bearer_only, require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.errors import openai_envelope, openai_error
from hearth.web.http.permissions import PrincipalDep

router = APIRouter(dependencies=[Depends(bearer_only), Depends(require_token)])
KEEPALIVE_SECONDS = 15.0
KEEPALIVE = ": keepalive\n\n"
CREATED = int(time.time())  # the models' `created`: when this gateway started


@router.get("/v1/models")
async def list_models(engine: EngineDep) -> dict[str, Any]:
    """`hearth` (the default agent), each agent set up, each model id set up."""
    return {"object": "list",
            "data": [_model(name) for name in openai_requests.model_names(engine)]}


@router.get("/v1/models/{name:path}")
async def retrieve_model(name: str, engine: EngineDep) -> dict[str, Any]:
    """One model `GET /v1/models` lists (a name with `/` in it too, as some clients send);
    404 `model_not_found` in OpenAI's shape for any other."""
    return _model(openai_requests.resolve(engine, name).name)


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "hearth"}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatRequest, engine: EngineDep, principal: PrincipalDep,
    session: Annotated[str | None, Header(alias="X-Hearth-Session")] = None,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    chat, history, text, files = shapes.read(body, session, principal.app)
    asked = Asked(openai_requests.resolve(engine, body.model), chat, history, text, principal,
                  files, shapes.format_of(body), shapes.key_of(idempotency_key))
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
