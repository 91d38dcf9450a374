"""Limits on request bodies, answered with the envelope before any route reads them: a cap on
their size (`BodyLimit`, 413) and on each wait for more of one (`BodyTimeout`, 408). An
upload (`STREAMED`) is not held here: its route streams it to disk under the attachments'
own limits, as large as those allow.

A client that sends its headers and then a body slowly, or never, would otherwise hold its
connection (a file descriptor) for as long as it liked; a few hundred of them exhaust the
process's files. The headers' own time limit is the server's (`web.http.server`).
"""

from __future__ import annotations

import asyncio
import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 4 * 1024 * 1024
# an upload's body is streamed to disk by its route, under the attachments' own limits
STREAMED = re.compile(r"^/api/sessions/[^/]+/attachments$")
# an OpenAI request may carry its images and files inline, in base64
LARGER = {"/v1/chat/completions": 64 * 1024 * 1024, "/channels/webhook": 64 * 1024 * 1024}
BODY_TIMEOUT_SECONDS = 30.0
UNREAD = ("GET", "HEAD", "OPTIONS")  # methods whose body no route reads


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
        if scope["method"] == "POST" and STREAMED.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        limit = max(self.max_bytes, LARGER.get(scope["path"], 0))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await self._too_large(send, limit)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send, limit: int) -> None:
        await _answer(send, 413, "request_too_large",
                      f"The request body is over {limit:,} bytes.")


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
