"""A real-HTTP fake of three web search APIs, for the web_search tool's tests.

`FakeSearch` serves on 127.0.0.1 (a free port) and speaks, at once:

- **SearXNG**'s JSON API: `GET /search?q=…&format=json` → `{"query", "results": [{"title",
  "url", "content", "engine"}]}` (`format` other than json: 403, as SearXNG answers when the
  JSON format is not enabled);
- **Brave Search**: `GET /res/v1/web/search?q=…&count=N` with `X-Subscription-Token` →
  `{"type": "search", "web": {"results": [{"title", "url", "description"}]}}` (no or a wrong
  token: 401);
- **Tavily**: `POST /tavily/search` with `Authorization: Bearer <key>` and a JSON body
  `{"query", "max_results"}` → `{"query", "results": [{"title", "url", "content", "score"}]}`
  (a wrong key: 401).

Each answers the scripted `results` (title, url, snippet), at most the count asked; `fail`
makes the next answers an HTTP error. Every request is kept in `requests` (method, path, query,
headers, body) for the tests to read.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from tests.fakes.loopback import Loopback

KEY = "search-key-0123456789"


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class Asked:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)


class FakeSearch(Loopback):
    def __init__(self, key: str = KEY) -> None:
        super().__init__()
        self.key = key
        self.results: list[Hit] = []
        self.requests: list[Asked] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                fake._answer(self, "GET", {})

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(size) or b"{}")
                except ValueError:
                    body = None
                fake._answer(self, "POST", body if isinstance(body, dict) else {"bad": True})

        self._serve(ThreadingHTTPServer(("127.0.0.1", self.port), Handler))
        return self

    def stop(self) -> None:
        self._unserve()

    @property
    def searxng_url(self) -> str:
        return self.url

    @property
    def brave_url(self) -> str:
        return f"{self.url}/res/v1/web/search"

    @property
    def tavily_url(self) -> str:
        return f"{self.url}/tavily/search"

    def fail(self, status: int, times: int = 1) -> None:
        with self._lock:
            self._failures += [status] * times

    def _answer(self, handler: BaseHTTPRequestHandler, method: str,
                body: dict[str, Any]) -> None:
        parts = urlsplit(handler.path)
        asked = Asked(method, parts.path, parse_qs(parts.query),
                      {k.lower(): v for k, v in handler.headers.items()}, body)
        with self._lock:
            self.requests.append(asked)
            failure = self._failures.pop(0) if self._failures else None
        status, answer = (failure, {"error": "failed"}) if failure else self._route(asked)
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, asked: Asked) -> tuple[int, dict[str, Any]]:
        if asked.method == "GET" and asked.path == "/search":
            if asked.query.get("format") != ["json"]:
                return 403, {"error": "format not allowed"}
            return 200, {"query": asked.query.get("q", [""])[0], "results": [
                {"title": h.title, "url": h.url, "content": h.snippet, "engine": "fake"}
                for h in self.results]}
        if asked.method == "GET" and asked.path == "/res/v1/web/search":
            if asked.headers.get("x-subscription-token") != self.key:
                return 401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN"}}
            count = int(asked.query.get("count", ["20"])[0])
            return 200, {"type": "search", "web": {"results": [
                {"title": h.title, "url": h.url, "description": h.snippet}
                for h in self.results[:count]]}}
        if asked.method == "POST" and asked.path == "/tavily/search":
            if asked.headers.get("authorization") != f"Bearer {self.key}":
                return 401, {"detail": {"error": "Unauthorized"}}
            count = int(asked.body.get("max_results", 5))
            return 200, {"query": asked.body.get("query"), "results": [
                {"title": h.title, "url": h.url, "content": h.snippet, "score": 0.9}
                for h in self.results[:count]]}
        return 404, {"error": "not found"}
