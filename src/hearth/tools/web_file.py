"""A file fetched whole from the web, through the same SSRF guard as web_fetch (`web_reach`):
an image an OpenAI request names by URL. Every hop is checked again (at most
`web.MAX_REDIRECTS`), the connection goes to a checked address only, and the body is read
within `max_bytes`: past it the fetch is refused, nothing of it kept."""

from __future__ import annotations

import ssl
from urllib.parse import urljoin

from hearth.tools.base import WebSettings
from hearth.tools.web_reach import (
    Blocked,
    Unreachable,
    checked_addresses,
    parse_target,
    pinned_get,
)

MAX_REDIRECTS = 5


class NotFetched(Exception):
    """Why a file could not be fetched, in a sentence."""


async def fetch_file(url: str, web: WebSettings, max_bytes: int,
                     verify: ssl.SSLContext | bool = True) -> bytes:
    """The body at `url` (following redirects, each checked); NotFetched says why not."""
    import httpx

    current = url
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            target = parse_target(current)
            addresses = await checked_addresses(target, web.allow_hosts)
            reply = await pinned_get(target, addresses[0], max_bytes, web.timeout_seconds,
                                     verify, any_type=True)
            if reply.location is None:
                if reply.status >= 400:
                    raise NotFetched(f"{target.url} answered HTTP {reply.status}")
                if reply.cut:
                    raise NotFetched(f"{target.url} is larger than "
                                     f"{max_bytes // (1024 * 1024)} MB")
                return reply.body
            current = urljoin(target.url, reply.location)
    except (Blocked, Unreachable) as exc:
        raise NotFetched(f"{current} was refused: {exc}") from None
    except httpx.HTTPError as exc:
        raise NotFetched(f"{current} could not be fetched ({type(exc).__name__})") from None
    raise NotFetched(f"{url} redirected more than {MAX_REDIRECTS} times")
