"""A local website for web_fetch to read, and web_fetch run against it: `Site` (routes by path,
and every request it was sent), `serve` (a site on a free loopback port, over TLS when asked),
`context` (a tool context allowed to reach loopback) and `fetch` (one call of the tool)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hearth.tools.base import ToolContext, ToolOutcome, WebSettings
from hearth.tools.web import WebFetch

Route = tuple[int, dict[str, str], bytes]


@dataclass
class Site:
    """A local HTTP server: routes by path, and every request it was sent."""

    routes: dict[str, Route | Callable[[BaseHTTPRequestHandler], object]] = field(
        default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


def serve(site: Site, tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            site.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            route = site.routes.get(self.path, (404, {"Content-Type": "text/plain"},
                                                b"no such page"))
            with contextlib.suppress(OSError):
                if callable(route):
                    route(self)
                    return
                status, headers, body = route
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.stop.set()
        server.shutdown()
        server.server_close()


def context(tmp_path: Path, allow: tuple[str, ...] = ("127.0.0.1",), timeout: float = 3.0,
            max_bytes: int = 2_000_000, output_chars: int = 50_000) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="k", run_id="r", output_chars=output_chars,
                       web=WebSettings(allow_hosts=allow, max_bytes=max_bytes,
                                       timeout_seconds=timeout))


def fetch(ctx: ToolContext, url: str, tool: WebFetch | None = None,
          **extra: Any) -> ToolOutcome:
    return asyncio.run((tool or WebFetch()).run({"url": url, **extra}, ctx))
