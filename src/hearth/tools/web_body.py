"""Reading a web response's body within a byte cap, compressed bodies included.

Owns `read_capped` (and `decoder_for`, which MCP's HTTP transport uses too): the body read from
the wire a chunk at a time, decoded by hand (gzip, deflate or none) into a buffer that never
holds more than the cap plus one byte. The reading stops at the cap and the connection is closed
with the rest unread, so neither a body that never ends (no Content-Length) nor a compression
bomb (a megabyte that inflates to gigabytes) can make the gateway hold more than the cap: a
decompressor here is asked for at most the room left, never for "all of it" as httpx's own
decoders do.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Protocol

ACCEPTED_ENCODINGS = "gzip, deflate"  # what web_fetch asks for, and all it will read


class UnreadableEncoding(Exception):
    """The body is sent in a content coding web_fetch does not read; the reason is half a
    sentence."""


class Decoder(Protocol):
    """Decodes a body a chunk at a time, never giving more than `room` bytes at once; input it
    could not yet turn into output is kept (`pending`) for the next call."""

    @property
    def pending(self) -> bool: ...

    def decode(self, data: bytes, room: int) -> bytes: ...

    def flush(self, room: int) -> bytes: ...


class _Identity:
    pending = False

    def decode(self, data: bytes, room: int) -> bytes:
        return data[:room]

    def flush(self, room: int) -> bytes:
        return b""


class _Inflate:
    """gzip or deflate (zlib-wrapped, or raw as some servers send it), at most `room` bytes out
    per call; input it could not yet turn into output waits in `unconsumed_tail`."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._raw_tried = False
        self._started = False  # some output came: too late to try raw deflate
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS)

    @property
    def pending(self) -> bool:
        return bool(self._inflater.unconsumed_tail)

    def decode(self, data: bytes, room: int) -> bytes:
        if self._inflater.eof:
            return b""
        try:
            out = self._inflater.decompress(self._inflater.unconsumed_tail + data, room)
        except zlib.error:
            if self._gzip or self._raw_tried or self._started:
                raise UnreadableEncoding("its compressed body is corrupt") from None
            self._raw_tried = True  # "deflate" sent without its zlib header
            self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.decode(data, room)
        self._started = self._started or bool(out)
        return out

    def flush(self, room: int) -> bytes:
        return self.decode(b"", room) if self._inflater.unconsumed_tail else b""


def decoder_for(content_encoding: str) -> Decoder:
    """The decoder for a Content-Encoding header; UnreadableEncoding for one we do not read."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) > 1:
        raise UnreadableEncoding(f"it is compressed {len(codings)} times over "
                                 f"({content_encoding}); web_fetch reads at most one gzip or "
                                 "deflate layer")
    if codings[0] in ("gzip", "x-gzip"):
        return _Inflate(gzip=True)
    if codings[0] == "deflate":
        return _Inflate(gzip=False)
    raise UnreadableEncoding(f"it is compressed as {codings[0]}, which web_fetch does not read "
                             f"(it asks for {ACCEPTED_ENCODINGS})")


async def read_capped(raw: AsyncIterator[bytes], content_encoding: str,
                      limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the decoded body, and whether there was more (then the rest is
    left unread). `raw` is the body as it comes off the wire (httpx's `aiter_raw`)."""
    decoder = decoder_for(content_encoding)
    body = bytearray()
    async for chunk in raw:
        body += decoder.decode(chunk, limit + 1 - len(body))
        if len(body) > limit:
            return bytes(body[:limit]), True
    body += decoder.flush(limit + 1 - len(body))
    if len(body) > limit:
        return bytes(body[:limit]), True
    return bytes(body), False
