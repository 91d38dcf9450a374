"""The web_search tool: a query to the search provider the owner set up (`[web_search]`:
SearXNG's JSON API, Brave's or Tavily's), answered as numbered results, each a title, a URL
and a snippet.

The provider's address is the owner's own choice (a SearXNG is often on loopback or the LAN)
and is asked as configured; what the agent then opens from the results goes through web_fetch
and its guard. A search changes nothing (a read), so it is not asked of the owner; a Temporary
chat may search unless `temporary = false` says no (its words would leave for the provider).
Where the provider charges (`usd_per_search`), a search is not made once a spending limit is
reached (`over_limit`), and each one made is counted on the Usage page and against the
limits (`charge`; both given by the engine). The key is told to the masker and
never said; a failure names the provider and the HTTP status, never its address or key.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hearth import masking
from hearth.config import WebSearchConfig
from hearth.privacy import reach
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused, at_most

QUERY_MAX = 400
SNIPPET_MAX = 400
TAGS = re.compile(r"<[^>]{0,200}>")
PROVIDERS = {"searxng": "SearXNG", "brave": "Brave Search", "tavily": "Tavily"}
Charge = Callable[[str, float], None]
OverLimit = Callable[[], str | None]


@dataclass(frozen=True)
class Result:
    title: str
    url: str
    snippet: str


class SearchFailed(Exception):
    """The provider could not answer; the message says why (no address, no key)."""


class WebSearch:
    name = "web_search"
    description = ("Search the web. Returns results as title, URL and snippet; open one with "
                   "web_fetch to read it.")
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for"},
            "max_results": {"type": "integer", "description": "At most this many results"},
        },
        "required": ["query"],
    }
    effect: Effect = "reads"
    placed: Placed = "remote"
    parallel_safe = True

    def __init__(self, config: WebSearchConfig, charge: Charge | None = None,
                 over_limit: OverLimit | None = None) -> None:
        self.config = config
        self._charge = charge
        self._over_limit = over_limit
        self._key = config.resolved_api_key()
        if self._key:
            masking.know(self._key)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        query, count = self._query(args), at_most(args, "max_results", self.config.max_results)
        if not self.config.temporary and reach.restricted_mode() in ("temporary", "unreadable"):
            raise ToolRefused("Refused: web searches are off in Temporary chats here "
                              "([web_search] temporary = false), so this chat's words do not "
                              "leave for the search provider.")
        name = PROVIDERS[self.config.provider]
        if self.config.usd_per_search and self._over_limit is not None:
            over = self._over_limit()
            if over is not None:
                raise ToolRefused(f"Refused: a search on {name} costs money, and {over[0].lower()}"
                                  f"{over[1:]}")
        try:
            async with asyncio.timeout(self.config.timeout_seconds):
                results = (await self._ask(query, count))[:count]
        except TimeoutError:
            return _failed(name, f"it took longer than {self.config.timeout_seconds:g} s")
        except SearchFailed as failed:
            return _failed(name, str(failed))
        if self.config.usd_per_search and self._charge is not None:
            self._charge(self.config.provider, self.config.usd_per_search)
        return ToolOutcome(output=_listing(query, results),
                           receipt=f"Searched {name}: {len(results)} result"
                                   f"{'s' if len(results) != 1 else ''}.")

    def _query(self, args: dict[str, Any]) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolRefused("Refused: give the words to search for as `query`.")
        if len(query) > QUERY_MAX:
            raise ToolRefused(f"Refused: a query is at most {QUERY_MAX} characters.")
        return " ".join(query.split())

    async def _ask(self, query: str, count: int) -> list[Result]:
        import httpx  # at the first search, not at every start

        try:
            async with httpx.AsyncClient(timeout=self.config.timeout_seconds) as client:
                reply = await self._request(client, query, count)
        except httpx.HTTPError as error:
            raise SearchFailed(f"it could not be reached ({type(error).__name__})") from None
        if reply.status_code >= 400:
            hint = " (check its key)" if reply.status_code in (401, 403) else ""
            raise SearchFailed(f"it answered HTTP {reply.status_code}{hint}")
        try:
            return _results(self.config.provider, reply.json())
        except ValueError:
            raise SearchFailed("its answer was not the JSON it should be") from None

    async def _request(self, client: Any, query: str, count: int) -> Any:
        address, provider = self.config.address, self.config.provider
        if provider == "searxng":
            return await client.get(address, params={"q": query, "format": "json"},
                                    headers={"Accept": "application/json"})
        if provider == "brave":
            return await client.get(address, params={"q": query, "count": count},
                                    headers={"Accept": "application/json",
                                             "X-Subscription-Token": self._key or ""})
        return await client.post(address, json={"query": query, "max_results": count},
                                 headers={"Authorization": f"Bearer {self._key or ''}"})


def _results(provider: str, body: Any) -> list[Result]:
    """The results of a provider's JSON answer (ValueError: not its shape)."""
    if not isinstance(body, dict):
        raise ValueError("not an object")
    found = (body.get("web") or {}).get("results") if provider == "brave" else body.get("results")
    if not isinstance(found, list):
        raise ValueError("no results list")
    snippet_key = "description" if provider == "brave" else "content"
    results = []
    for item in found:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        results.append(Result(_plain(item.get("title")) or item["url"], item["url"],
                              _plain(item.get(snippet_key))[:SNIPPET_MAX]))
    return results


def _plain(value: object) -> str:
    """A provider's text without its markup (`<strong>` around matches, entities)."""
    if not isinstance(value, str):
        return ""
    return " ".join(html.unescape(TAGS.sub("", value)).split())


def _listing(query: str, results: list[Result]) -> str:
    if not results:
        return f"No results for “{query}”."
    lines = [f"Results for “{query}”:"]
    for number, result in enumerate(results, start=1):
        lines.append(f"{number}. {result.title}\n   {result.url}")
        if result.snippet:
            lines.append(f"   {result.snippet}")
    return "\n".join(lines)


def _failed(name: str, why: str) -> ToolOutcome:
    sentence = masking.mask(f"The search on {name} failed: {why}. Nothing was found.")
    return ToolOutcome(output=sentence, receipt=sentence, ok=False)
