"""Limits on request bodies, answered with the envelope before any route reads them: who sent
a body is proven before a byte of it is read (`BodyLimit`, 401), it is held to a cap on its
size (413: the declared `Content-Length` before reading, the bytes counted while they come,
chunked ones too) and to each wait for more of it (`BodyTimeout`, 408).

The sender is proven from the headers alone, as the routes prove it (`web.http.auth.sender_of`:
the gateway's token, an app's, the dashboard's signed-in cookie; on `/v1/` a bearer token
alone); nothing proving anyone is 401 at once and the connection closed, so a stranger's body
is never read, let alone held (before, four such connections held ~260 MB). The routes open to
anyone by design take a body from anyone, each under a bound of its own (`OPEN`): the sign-in
form, and the channels' doors whose sender is proven by a signature over the body, refused
404 at once while their channel is not set up. An upload (`STREAMED`) is not held here: its
route streams it to disk, bounded by one file's size (`[attachments] max_file_mb`); an answer
given before its body's end says `Connection: close`, as every refusal here does.

A client that sends its headers and then a body slowly, or never, would otherwise hold its
connection (a file descriptor) for as long as it liked; a few hundred of them exhaust the
process's files. The headers' own time limit is the server's (`web.http.server`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import OperationalError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hearth.errors import Refusal
from hearth.web.http.auth import bearer_only, sender_of
from hearth.web.http.uploads import FORM_ROOM

MIB = 1024 * 1024
MAX_BODY_BYTES = 4 * MIB
# an upload's body is streamed to disk by its route, bounded by one file's size and a form's
# envelope (`web.http.uploads.FORM_ROOM`)
STREAMED = re.compile(r"^/api/sessions/[^/]+/attachments$")
# an OpenAI request may carry its images and files inline, in base64
LARGER = {"/v1/chat/completions": 64 * MIB}
OPENAI = "/v1/"  # a bearer token alone there: never the dashboard's cookie
BODY_TIMEOUT_SECONDS = 30.0
UNREAD = ("GET", "HEAD", "OPTIONS")  # methods whose body no route reads


@dataclass(frozen=True)
class Open:
    """A route open to anyone that takes a body (POST): its own bound, and the chat channel
    that must be set up for it to be served (its name, and what the owner calls it)."""

    max_bytes: int
    channel: str | None = None
    called: str = ""


OPEN = {
    "/login": Open(16 * 1024),  # the sign-in form: the token, and nothing else
    # a webhook app's signed message, its files inline in base64
    "/channels/webhook": Open(64 * MIB, "webhook", "webhook"),
    "/channels/slack/events": Open(1 * MIB, "slack", "Slack"),  # Slack's signed events
    "/channels/slack/actions": Open(1 * MIB, "slack", "Slack"),  # and button presses
}


@dataclass(frozen=True)
class Bound:
    """What a request's body may be: at most `max_bytes`, and whether its route streams it."""

    max_bytes: int
    streamed: bool = False
    code: str = "request_too_large"

    def refusal(self) -> Refusal:
        if self.streamed:
            return Refusal(self.code, 413,
                           f"This file is larger than {(self.max_bytes - FORM_ROOM) / MIB:g} MB, "
                           "the most one file may be; nothing of it was kept.")
        return Refusal(self.code, 413, f"The request body is over {self.max_bytes:,} bytes.")


def _has_body(headers: dict[bytes, bytes]) -> bool:
    """Does the request say a body follows?"""
    length = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (length is not None and length != b"0")


def _closing(send: Send) -> Send:
    """`send`, with the answer saying `Connection: close`."""
    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message,
                       "headers": [*message.get("headers", []), (b"connection", b"close")]}
        await send(message)

    return closing


class BodyLimit:
    """Proves a body's sender, then bounds the body (see the module's docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"]) if scope["type"] == "http" else {}
        if scope["type"] != "http" or not _has_body(headers):
            await self.app(scope, receive, send)
            return
        if scope["method"] in UNREAD:
            # A body no route reads ends its connection (the rest of it cannot be trickled in
            # to hold the connection), and the answer says so: a client that kept the
            # connection for its next request would get a reset instead of an answer.
            await self.app(scope, receive, _closing(send))
            return
        try:
            bound = await self._bound_of(scope)
        except (Refusal, OperationalError) as refused:
            await refuse(scope, send, refused)
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > bound.max_bytes:
            await refuse(scope, send, bound.refusal())
            return
        if bound.streamed:
            await _stream(self.app, scope, receive, send)
            return
        body = await _read(receive, bound)
        if isinstance(body, Refusal):
            await refuse(scope, send, body)
            return
        if body is not None:
            await self.app(scope, _replay(body, receive), send)

    async def _bound_of(self, scope: Scope) -> Bound:
        """The request's bound, once its sender is proven (an open route's own: refused 404
        while its channel is not set up)."""
        path: str = scope["path"]
        door = OPEN.get(path) if scope["method"] == "POST" else None
        if door is not None:
            _check_served(scope, door)
            return Bound(door.max_bytes)
        request = Request(scope)
        if path.startswith(OPENAI):
            await bearer_only(request)
        await sender_of(request)
        if scope["method"] == "POST" and STREAMED.match(path):
            files: int = scope["app"].state.engine.config.attachments.max_file_bytes
            return Bound(files + FORM_ROOM, streamed=True, code="attachment_too_large")
        return Bound(max(self.max_bytes, LARGER.get(path, 0)))


def _check_served(scope: Scope, door: Open) -> None:
    """An open route of a chat channel is 404 while that channel is not set up."""
    if door.channel is None or door.channel in scope["app"].state.channels.adapters:
        return
    raise Refusal("not_found", 404,
                  f"The {door.called} channel is not set up: add [channels.{door.channel}] "
                  "to config.toml.")


async def _read(receive: Receive, bound: Bound) -> bytes | Refusal | None:
    """The whole body, counted as it comes: a refusal past the bound, None when the client
    went away first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > bound.max_bytes:
            return bound.refusal()
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _stream(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Give `app` the body as it comes; an answer it starts before the body's end (a refusal
    part way through an upload) says `Connection: close`, as the server then ends the
    connection: a client that kept it for its next request would get a reset instead."""
    ended = False

    async def receiving() -> Message:
        nonlocal ended
        message = await receive()
        ended = ended or message["type"] != "http.request" or not message.get("more_body")
        return message

    closing = _closing(send)

    async def sending(message: Message) -> None:
        await (send if ended else closing)(message)

    await app(scope, receiving, sending)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body read once, then what the connection says next."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


Handler = Callable[[Request, Exception], "Response | Awaitable[Response]"]


async def refuse(scope: Scope, send: Send, error: Exception) -> None:
    """Answer `error` as the app's own handlers answer it from a route (the envelope, OpenAI's
    shape on /v1), saying `Connection: close`: the body it came with is never read, and the
    server ends the connection rather than read it."""
    handlers: dict[Any, Handler] = scope["app"].exception_handlers
    handler = next(handlers[kind] for kind in type(error).__mro__ if kind in handlers)
    answer = handler(Request(scope), error)
    response = await answer if inspect.isawaitable(answer) else answer
    response.headers["connection"] = "close"
    await response(scope, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


class BodyTimedOut(Exception):
    """No more of the request's body came within the time limit."""


class BodyTimeout:
    """Each wait for more of a request's body lasts at most `seconds`; past it the request is
    answered 408 `request_timeout` (when nothing was answered yet) and its connection closed.

    Only the body is timed: once its last part has come, a later `receive()` (a stream
    waiting to hear that its client went away) waits as long as it likes.
    """

    def __init__(self, app: ASGIApp, seconds: float = BODY_TIMEOUT_SECONDS) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        answered = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.seconds)
            except TimeoutError:
                raise BodyTimedOut from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def noting_send(message: Message) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, noting_send)
        except BodyTimedOut:
            if not answered:  # else the server closes the unfinished response's connection
                await _answer(send, 408, "request_timeout",
                              f"The request's body stopped arriving for {self.seconds:g} "
                              "seconds, so the request was dropped; send it again.",
                              close=True)


async def _answer(send: Send, status: int, code: str, message: str, close: bool = False) -> None:
    """Answer with the error envelope (and end the connection when `close`)."""
    payload = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(payload)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
