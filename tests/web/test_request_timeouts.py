"""Half-sent requests are timed out, over raw sockets against a gateway subprocess whose limits
are short (`[gateway] header_timeout_seconds = 1`, `body_timeout_seconds = 1`): a connection
that sends nothing, part of its headers, its headers a byte at a time, or its headers and part
of a body is answered 408 or closed within the limit; a slow but steady body, an ordinary
request, a long-lived event stream and a connection idle past its client's own limit are not
cut."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any

import httpx

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.sockets import connect, one_answer, until_closed

LIMIT = 1.0  # both limits, in the gateway's config
SLACK = 2.5  # how much later than the limit the close may come on a busy machine
server, gateway, api = module_gateway(  # a process: its open files are counted
    "timeouts", config=f"[gateway]\nheader_timeout_seconds = {LIMIT}\n"
                       f"body_timeout_seconds = {LIMIT}\n", process=True)


def _connect(gw: Gateway) -> socket.socket:
    return connect(gw.port)


def _timeout_answer(raw: bytes) -> dict[str, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), raw
    assert b"connection: close" in head.lower(), raw
    error: dict[str, Any] = json.loads(body)["error"]
    assert error["code"] == "request_timeout" and error["message"].endswith("."), error
    return error


def _open_files(gw: Gateway) -> int:
    assert gw.proc is not None
    return len(os.listdir(f"/proc/{gw.proc.pid}/fd"))


def test_a_connection_that_sends_nothing_is_closed(gateway: Gateway) -> None:
    """Before: uvicorn armed no timer until a first response was sent, so a connection that
    never sent a byte stayed open (recv waited the whole test window)."""
    with _connect(gateway) as sock:
        raw, took = until_closed(sock, LIMIT + SLACK)
    assert took >= LIMIT * 0.8
    if raw:
        _timeout_answer(raw)


def test_half_sent_headers_are_answered_408_and_closed_and_free_their_files(
        gateway: Gateway) -> None:
    """Before: each connection stayed open for good, so the gateway's open files grew by one per
    socket (a few hundred exhausted the limit)."""
    before = _open_files(gateway)
    socks = [_connect(gateway) for _ in range(150)]
    try:
        for sock in socks:
            sock.sendall(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz")
        time.sleep(0.3)
        assert _open_files(gateway) >= before + 100  # they are held while they last
        answers = [until_closed(sock, LIMIT + SLACK)[0] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    for raw in answers:
        _timeout_answer(raw)
    deadline = time.monotonic() + 3
    while _open_files(gateway) > before + 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _open_files(gateway) <= before + 5
    assert httpx.get(f"{gateway.url}/healthz", timeout=5).status_code == 200


def test_headers_trickled_a_byte_at_a_time_are_cut_at_the_deadline(gateway: Gateway) -> None:
    """The limit is a deadline from the request's first byte, not an idle timer that each byte
    resets. Before: the connection stayed open as long as bytes kept coming."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200
    with _connect(gateway) as sock:
        sock.settimeout(0.2)
        begun = time.monotonic()
        got = b""
        closed = False
        for byte in request:
            if time.monotonic() - begun > LIMIT + SLACK:
                break
            try:
                sock.sendall(bytes([byte]))
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            got += data
            if not data:
                closed = True
                break
        took = time.monotonic() - begun
    assert closed, f"still open after {took:.1f} s of trickled headers"
    assert took < LIMIT + SLACK
    if got:
        _timeout_answer(got)


def test_a_body_that_stops_arriving_is_answered_408_and_closed(gateway: Gateway) -> None:
    """Before: the request waited for the rest of its body for ever (the connection held)."""
    with _connect(gateway) as sock:
        sock.sendall(b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n"
                     b'{"name": "half')
        raw, took = until_closed(sock, LIMIT + SLACK)
    error = _timeout_answer(raw)
    assert "body" in error["message"]
    assert took >= LIMIT * 0.8


def test_a_slow_but_steady_body_is_served(gateway: Gateway) -> None:
    """Each wait for more of the body is timed, not the whole body: pieces half a limit apart
    over more than twice the limit are one request, served."""
    body = json.dumps({"name": "slow-and-steady"}).encode()
    pieces = [body[i:i + 6] for i in range(0, len(body), 6)]
    with _connect(gateway) as sock:
        sock.sendall(b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        for piece in pieces:
            time.sleep(LIMIT / 2)
            sock.sendall(piece)
        raw, _ = until_closed(sock, 10)
    assert len(pieces) * LIMIT / 2 > 2 * LIMIT
    assert raw.startswith(b"HTTP/1.1 201"), raw
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["key"] == "slow-and-steady"


def test_an_event_stream_and_a_kept_alive_connection_outlive_the_limits(
        gateway: Gateway, api: Api, server: ScriptedModelServer) -> None:
    """An event stream open for three times both limits still delivers the next turn's frames;
    an ordinary client's requests go on answering."""
    key = api.new_chat()
    server.push(Reply(text="Still here.", chunks=2))
    frames: list[dict[str, Any]] = []
    opened = threading.Event()

    def listen() -> None:
        with httpx.Client(base_url=gateway.url, timeout=20,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as client, \
                client.stream("GET", f"/api/sessions/{key}/events") as stream:
            assert stream.status_code == 200
            opened.set()
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    if frames[-1]["type"] == "done":
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert opened.wait(10)
    time.sleep(3 * LIMIT + 0.5)
    assert listener.is_alive(), "the event stream was cut"
    run_id = api.send(key, "are you there?")["run_id"]
    assert api.wait(run_id)["status"] == "complete"
    listener.join(10)
    assert [f["type"] for f in frames][-1] == "done", frames
    assert "Still here." in "".join(f.get("text", "") for f in frames if f["type"] == "delta")
    assert api.http.get(f"/api/sessions/{key}").status_code == 200


def test_a_body_nobody_reads_cannot_hold_the_connection_after_the_answer(
        gateway: Gateway) -> None:
    """A GET answered before its declared body all came ends its connection, so the rest of
    that body cannot be trickled in to keep it. Before: the connection was kept alive, and
    every trickled byte put off its keep-alive timer again."""
    with _connect(gateway) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
                     b"\r\npart of it")
        raw, took = until_closed(sock, LIMIT + SLACK)
    assert raw.startswith(b"HTTP/1.1 200"), raw
    assert took < LIMIT + SLACK


def test_an_idle_connection_outlasts_the_clients_own_idle_limit(gateway: Gateway) -> None:
    """A connection idle for longer than httpx keeps its own (5 s) still answers: the client
    always gives it up first, so a request cannot meet the server's close on the way. Before:
    both were 5 s, and a request sent at that moment got "Server disconnected"."""
    ask = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with _connect(gateway) as sock:
        sock.sendall(ask)
        assert one_answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(httpx.Limits().keepalive_expiry + 1.0)
        sock.sendall(ask)
        assert one_answer(sock).startswith(b"HTTP/1.1 200")
