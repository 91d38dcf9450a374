"""Serving the app with uvicorn: ending live streams the moment a stop is asked for, and a time
limit on each request's headers.

uvicorn waits for open connections before it shuts the app down; an SSE stream never ends on
its own, so without this every stop would wait out the whole grace period.

uvicorn times only the idle wait between two requests (`timeout_keep_alive`): a connection
that opens and sends nothing, or sends part of its headers and then stops (or trickles them a
byte at a time), was held for ever, and a few hundred of them exhaust the process's files.
`TimedHttpProtocol` gives the headers `gateway.header_timeout_seconds` from the connection's
opening or the request's first byte; the body's waits are timed by `web.http.limits.BodyTimeout`.
A response sent before its request's body had all come ends the connection, so a body nobody
reads cannot be trickled in for ever either. A request that is served (an event stream
included) is never cut by these limits. Each connection holds a file: the soft limit on open
files is raised to the hard one before serving (`web.http.descriptors`).

An idle kept-alive connection is held `KEEP_ALIVE_SECONDS`, longer than the clients that talk
to it keep theirs (httpx, which Hearth's own client and most Python clients use, drops an idle
connection after 5 seconds, uvicorn's default too): with both at 5 seconds a request sent on a
connection idle for about that long could meet the server's close on the way, and the client
saw "Server disconnected without sending a response" for a request never read. A client
always gives up its idle connection first, so that race cannot happen.

`hearth gateway` binds its address before it builds anything (`listen`): an address it cannot
have is one sentence naming the setting to change (`ListenRefused`), said before any start-up
line. It says where it serves only once the server is up (`on_started`). Its logs
(`hearth.logs`) are Hearth's own facts, a line each; other libraries' chatter (Alembic's
migration steps, httpx's requests, uvicorn's banner) only with `--verbose`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hearth.engine.runtime import Engine
from hearth.web.http import descriptors

GRACE_SECONDS = 10
KEEP_ALIVE_SECONDS = 30  # above the 5 s after which httpx (and most clients) drop idle ones
HEADER_TIMEOUT_SECONDS = 15.0
PORT_SETTING = ("`port` under [gateway] in config.toml, the HEARTH_PORT environment variable, "
                "or `hearth gateway --port`")
HOST_SETTING = ("`host` under [gateway] in config.toml, the HEARTH_HOST environment variable, "
                "or `hearth gateway --host`")


class ListenRefused(Exception):
    """The gateway cannot listen where it was asked to; the message names what to change."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port`, for `serve` (ListenRefused saying why not)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise ListenRefused(f"The gateway cannot listen on {host!r}, a name that does not "
                            f"resolve ({error.strerror}); set another with {HOST_SETTING}.") \
            from error
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise ListenRefused(_bind_refusal(host, port, error)) from error
    return sock


def _bind_refusal(host: str, port: int, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return (f"Port {port} on {host} is already in use (by another Hearth gateway or "
                f"another program); choose another with {PORT_SETTING}.")
    if error.errno == errno.EACCES:
        return (f"Port {port} on {host} needs privileges this user does not have; choose a "
                f"port above 1023 with {PORT_SETTING}.")
    if error.errno == errno.EADDRNOTAVAIL:
        return (f"The address {host} is not one of this machine's; set another with "
                f"{HOST_SETTING}.")
    return (f"The gateway cannot listen on {host}:{port} ({error.strerror}); change "
            f"{HOST_SETTING}, or {PORT_SETTING}.")


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, engine: Engine,
                 on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._engine = engine
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._on_started is not None:
            self._on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            asyncio.get_running_loop().call_soon_threadsafe(self._engine.stop_admitting)
        except RuntimeError:  # no loop running yet, so nothing is streaming
            pass
        super().handle_exit(sig, frame)


def _timed_out_answer(seconds: float) -> bytes:
    payload = json.dumps({"error": {
        "code": "request_timeout",
        "message": f"The request's headers did not all arrive within {seconds:g} seconds, so "
                   "the connection was closed; send the request again.",
    }}).encode()
    head = ("HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n")
    return head.encode() + payload


class TimedHttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with a time limit on each request's headers: armed when the
    connection opens and at a request's first byte, disarmed when its headers are complete;
    when it runs out the connection is answered 408 (if no response is under way) and closed.
    `timed(seconds)` makes the class uvicorn is handed."""

    header_seconds: float = HEADER_TIMEOUT_SECONDS
    _headers_timer: asyncio.TimerHandle | None = None

    @classmethod
    def timed(cls, seconds: float) -> type[TimedHttpProtocol]:
        return type("TimedHttpProtocol", (cls,), {"header_seconds": seconds})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_headers_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_headers_timer()

    def on_headers_complete(self) -> None:
        self._disarm_headers_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        answered = self.cycle  # the request just answered, unless a pipelined one is under way
        if (answered is not None and answered.response_complete and answered.more_body
                and not self.transport.is_closing()):
            self.transport.close()  # its body never all came: nothing more can be read here

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_headers_timer()
        super().connection_lost(exc)

    def _arm_headers_timer(self) -> None:
        if self._headers_timer is None:  # a deadline, not an idle timer: data never moves it
            self._headers_timer = self.loop.call_later(self.header_seconds, self._headers_late)

    def _disarm_headers_timer(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _headers_late(self) -> None:
        self._headers_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(_timed_out_answer(self.header_seconds))
        self.transport.close()


def gateway_server(app: FastAPI, *, host: str, port: int,
                   log_config: dict[str, Any] | None = LOGGING_CONFIG,
                   log_level: str = "warning",
                   on_started: Callable[[], None] | None = None) -> GatewayServer:
    """The server `serve` runs: its protocol, limits and shutdown. `log_config` is uvicorn's
    own logging set-up (its default); None leaves logging as the caller set it up.
    `on_started` is called once it serves. The process's soft limit on open files is raised
    to its hard one first (`web.http.descriptors`)."""
    descriptors.raise_limit()
    engine: Engine = app.state.engine
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=GRACE_SECONDS,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        http=TimedHttpProtocol.timed(engine.config.gateway.header_timeout_seconds),
        log_config=log_config,
    )
    return GatewayServer(config, engine, on_started)


def serve(app: FastAPI, *, sock: socket.socket, verbose: bool = False,
          on_started: Callable[[], None] | None = None) -> None:
    """Serve `app` on `sock` (from `listen`) until a signal stops it."""
    host, port = sock.getsockname()[:2]
    gateway_server(app, host=host, port=port, log_level="info" if verbose else "warning",
                   on_started=on_started).run(sockets=[sock])
