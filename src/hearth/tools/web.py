"""The web_fetch tool: one page from the public web, as readable text.

Owns the tool itself: its arguments, the overall time limit, following redirects by hand
(at most MAX_REDIRECTS, every hop checked again), and the sentences it answers with (the page
and its receipt, an HTTP error with an excerpt, a refusal, a failure). What a fetch may reach
and the pinned request are web_reach.py's; reading the body within the cap is web_body.py's;
turning HTML into text is web_text.py's.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any
from urllib.parse import urljoin

from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused, at_most
from hearth.tools.files import size_words
from hearth.tools.web_reach import (
    Blocked,
    IPAddress,
    Reply,
    Target,
    Unreachable,
    checked_addresses,
    parse_target,
    pinned_get,
)
from hearth.tools.web_text import page_text

MAX_REDIRECTS = 5
ERROR_EXCERPT_CHARS = 500

class WebFetch:
    name = "web_fetch"
    description = (
        "Fetch a web page (http or https) and return its text: HTML is turned into readable "
        "text with the title first; plain text and JSON come back as they are."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The http:// or https:// URL to fetch"},
            "max_chars": {"type": "integer",
                          "description": "At most this many characters of text back"},
        },
        "required": ["url"],
    }
    effect: Effect = "external"
    placed: Placed = "remote"
    parallel_safe = True

    def __init__(self, verify: ssl.SSLContext | None = None) -> None:
        """`verify`: the TLS context to check certificates with (default: the system's)."""
        self._verify: ssl.SSLContext | bool = verify if verify is not None else True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        import httpx  # when the tool is first used, not at every start

        url = str(args["url"]).strip()
        limit = at_most(args, "max_chars", ctx.output_chars)
        try:
            async with asyncio.timeout(ctx.web.timeout_seconds):
                target, reply, hops = await self._follow(url, ctx)
        except (TimeoutError, httpx.TimeoutException):
            return _failed(url, f"it took longer than {ctx.web.timeout_seconds:g} seconds")
        except Unreachable as exc:
            return _failed(url, str(exc))
        except httpx.HTTPError as exc:
            return _failed(url, f"the connection failed ({type(exc).__name__}: {exc})")
        except httpx.InvalidURL as exc:
            raise ToolRefused(f"Refused {url}: it is not a valid URL ({exc}).") from None
        # Turning HTML into text is CPU work (bounded by HTML_SECONDS): off the event loop.
        if reply.status >= 300:
            return await asyncio.to_thread(_http_error, target, reply)
        return await asyncio.to_thread(self._page, target, reply, hops, limit)

    async def _follow(self, url: str, ctx: ToolContext) -> tuple[Target, Reply, int]:
        """Fetch `url`, following at most MAX_REDIRECTS redirects, every hop checked."""
        current, came_from = url, None
        for hops in range(MAX_REDIRECTS + 1):
            try:
                target = parse_target(current)
                addresses = await checked_addresses(target, ctx.web.allow_hosts)
                reply = await self._get(target, addresses, ctx)
            except Blocked as exc:
                where = current if came_from is None else (
                    f"the redirect from {came_from} to {current}")
                raise ToolRefused(f"Refused {where}: {exc}.") from None
            if reply.location is None:
                return target, reply, hops
            came_from, current = target.url, urljoin(target.url, reply.location)
        raise ToolRefused(f"Refused {url}: it redirected more than {MAX_REDIRECTS} times "
                          f"(the last hop was to {current}).")

    async def _get(self, target: Target, addresses: list[IPAddress],
                   ctx: ToolContext) -> Reply:
        """The first checked address that takes the connection answers."""
        import httpx

        failure: httpx.ConnectError | None = None
        for ip in addresses:
            try:
                return await pinned_get(target, ip, ctx.web.max_bytes,
                                        ctx.web.timeout_seconds, self._verify)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    def _page(self, target: Target, reply: Reply, hops: int, limit: int) -> ToolOutcome:
        try:
            text = page_text(reply)
        except Blocked as exc:
            raise ToolRefused(f"Refused {target.url}: {exc}.") from None
        notes = []
        if reply.cut:
            notes.append(f"(cut at {size_words(len(reply.body))}; the rest of the page was "
                         "not read)")
        if len(text) > limit:
            text = text[:limit]
            notes.append(f"[cut at {limit} characters]")
        output = "\n".join([text, *notes]) if notes else text
        extra = "".join([
            f", after {hops} redirect{'s' if hops != 1 else ''}" if hops else "",
            f", cut at {size_words(len(reply.body))}" if reply.cut else "",
        ])
        receipt = (f"Fetched {size_words(len(reply.body))} of text from {target.url} "
                   f"(HTTP {reply.status}{extra}).")
        return ToolOutcome(output=output, receipt=receipt)


def _http_error(target: Target, reply: Reply) -> ToolOutcome:
    head = f"HTTP {reply.status} from {target.url}"
    excerpt = ""
    if reply.kind != "other" and reply.body:
        try:
            excerpt = page_text(reply)[:ERROR_EXCERPT_CHARS].strip()
        except Blocked:
            excerpt = ""
    output = f"{head}\n\n{excerpt}" if excerpt else head
    return ToolOutcome(output=output, receipt=f"Got {head}.", ok=False)


def _failed(url: str, reason: str) -> ToolOutcome:
    sentence = f"Could not fetch {url}: {reason}."
    return ToolOutcome(output=sentence, receipt=sentence, ok=False)
