"""Server-Sent Events read off a streamed SDK response, for the provider adapters.

The adapters take the official SDKs' raw streaming responses (`with_streaming_response`)
and read the events here instead of through the SDKs' typed chunk objects, whose
construction was most of what reading an answer cost (see bench/provider.py). This is the
event-stream format as the HTML standard defines it, for the lines the SDK's response gives
(`iter_lines`: split at CR, LF or CRLF, without them): `data:` lines joined by a newline,
`event:` naming the event, a comment (`:`) and any other field ignored, an empty line ending
the event; an event the stream ends in the middle of is dropped, as a browser drops it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    name: str  # the `event:` field ("" when the event named none)
    data: str  # its `data:` lines, joined by "\n"


async def events(lines: AsyncIterator[str]) -> AsyncIterator[Event]:
    """The events of a stream given as its lines, each once its empty line arrives (one with
    no `data:` at all is skipped)."""
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield Event(name, "\n".join(data))
            name, data = "", []
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
