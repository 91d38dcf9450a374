"""How much Hearth takes from an MCP server, at the transport: one message at most
MAX_MESSAGE_BYTES.

Owns the cap and its sentence (`too_large`, recognised again by `is_too_large`), and the HTTP
client a streamable-HTTP server is reached with (`bounded_http_client`): every response body is
decoded here, by hand and within bounds (gzip or deflate; a compression bomb inflates no
further than the cap), before the SDK reads it. A JSON answer larger than the cap ends its read
with `MessageTooLarge`, which the SDK turns into an error answer to that one request; an event
stream is passed on in bounded pieces and the SDK bounds each event (`max_sse_event_size`).
The stdio transport's bound is mcp_stdio.py's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

from hearth.tools.web_body import (
    ACCEPTED_ENCODINGS,
    Decoder,
    UnreadableEncoding,
    decoder_for,
)

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
PIECE_BYTES = 64 * 1024  # an event stream is inflated this much at a time
_TOO_LARGE = "was larger than"  # the words `is_too_large` looks for in an error's message
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's own default (a stream stays open)


def too_large(limit: int = MAX_MESSAGE_BYTES) -> str:
    """The reason an answer was dropped, as the end of a sentence."""
    return f"its answer {_TOO_LARGE} {limit // (1024 * 1024)} MB, so it was not read"


def is_too_large(message: str) -> bool:
    return _TOO_LARGE in message and "so it was not read" in message


class MessageTooLarge(httpx2.StreamError):
    """A response body passed the cap (or could not be decoded); its reading ends here."""


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body decoded here: all of it at most `limit` bytes, or (`limit` None, an
    event stream) in pieces of bounded size."""

    def __init__(self, inner: httpx2.AsyncByteStream, decoder: Decoder,
                 limit: int | None) -> None:
        self._inner = inner
        self._decoder = decoder
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            if self._limit is None:
                for piece in self._pieces(chunk):
                    yield piece
                continue
            piece = self._decode(chunk, self._limit + 1 - total)
            total += len(piece)
            if total > self._limit:
                raise MessageTooLarge(too_large(self._limit))
            yield piece

    def _pieces(self, chunk: bytes) -> list[bytes]:
        pieces = [self._decode(chunk, max(PIECE_BYTES, len(chunk)))]
        while self._decoder.pending:  # at most one network chunk's worth waits here
            pieces.append(self._decode(b"", PIECE_BYTES))
        return pieces

    def _decode(self, chunk: bytes, room: int) -> bytes:
        try:
            return self._decoder.decode(chunk, room)
        except UnreadableEncoding as exc:
            raise MessageTooLarge(f"its answer could not be read: {exc}") from None

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Unreadable:
    pending = False

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def decode(self, data: bytes, room: int) -> bytes:
        raise UnreadableEncoding(self._reason)

    def flush(self, room: int) -> bytes:
        return b""


async def _bound_body(response: httpx2.Response) -> None:
    """Response hook (before any of the body is read): the body is decoded by `_BoundedBody`
    instead of httpx's decoders, which inflate each network chunk whole."""
    if not isinstance(response.stream, httpx2.AsyncByteStream):
        return
    decoder: Decoder
    try:
        decoder = decoder_for(response.headers.get("content-encoding", ""))
    except UnreadableEncoding as exc:
        decoder = _Unreadable(str(exc))  # said when the body is read, as the SDK expects
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    limit = None if media == "text/event-stream" else MAX_MESSAGE_BYTES
    response.stream = _BoundedBody(response.stream, decoder, limit)
    if "content-encoding" in response.headers:
        del response.headers["content-encoding"]


def bounded_http_client() -> httpx2.AsyncClient:
    """The client a streamable-HTTP MCP server is reached with (the caller closes it)."""
    return httpx2.AsyncClient(timeout=HTTP_TIMEOUT, headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
                              event_hooks={"response": [_bound_body]})
