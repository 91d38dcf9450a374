"""No request body is read before its sender is proven, over raw sockets against a gateway
subprocess (`body_timeout_seconds = 1`): headers declaring a 100 MB body (or a chunked one)
with no token, a wrong one, a revoked app's or a signed-out cookie are answered 401 before a
byte of the body is sent, and the connection closed; strangers pushing bodies leave the
gateway's memory where it was; a proven sender's body is still bounded before it is read
and timed while it comes; the routes open by design (sign-in, the signed channels) keep
bounds of their own, and are refused at once while their channel is not set up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from hearth.config import Config
from hearth.home import Home
from hearth.web.app import create_app
from hearth.web.http import limits, signin
from hearth.web.http.permissions import PUBLIC, ROUTE_PERMISSIONS
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.apps import app_token
from tests.support.sockets import Answer, connect, one_answer, parsed, until_closed

LIMIT = 1.0  # the body's time limit, in the gateway's config
SLACK = 2.5  # how much later than a limit an answer may come on a busy machine
server, gateway, api = module_gateway(
    "unproven", config=f"[gateway]\nbody_timeout_seconds = {LIMIT}\n"
                       "[attachments]\nmax_file_mb = 1\n", process=True)
HUGE = 100_000_000


def _head(method: str, path: str, *headers: str, length: int | None = HUGE) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    lines.append(f"Content-Length: {length}" if length is not None
                 else "Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answered_before_the_body(gw: Gateway, head: bytes) -> Answer:
    """Send `head` alone (none of the body it declares); the whole answer, which must come
    at once (well before the body's time limit), and the connection closed after it."""
    with connect(gw.port) as sock:
        sock.sendall(head)
        begun = time.monotonic()
        answer = parsed(one_answer(sock, within=SLACK))
        took = time.monotonic() - begun
        assert took < LIMIT, f"answered after {took:.1f} s: it waited for the body"
        until_closed(sock, SLACK)
    assert answer.headers.get("connection") == "close", answer.headers
    return answer


def _unauthorized(answer: Answer) -> str:
    assert answer.status == 401, (answer.status, answer.body)
    error = answer.json()["error"]
    assert error["message"].endswith("."), error
    return str(error["code"])


CHAT_ROUTES = ["/api/sessions", "/api/sessions/somebody/messages", "/api/memory",
               "/api/import", "/api/sessions/somebody/attachments", "/chats/somebody/send"]


def test_a_body_without_a_proven_sender_is_refused_before_it_is_sent(
        gateway: Gateway, api: Api) -> None:
    """Before: a JSON route's body was read whole (up to 4 MB, 64 MB on /v1) before the
    route's own check of the token, so a body declared over the bound was 413 and one under
    it was waited for (408 after the time limit) instead of 401 at once."""
    revoked = app_token(api, "gone-app", "send_messages")
    assert api.http.delete("/api/apps/gone-app").status_code == 200
    never_signed_in = signin.issue(TOKEN)  # signed by the gateway, but no sign-in is on
    strangers = [(), ("Authorization: Bearer not-the-token",),
                 (f"Authorization: Bearer {revoked}",),
                 (f"Cookie: {signin.COOKIE}={never_signed_in}", "X-CSRF-Token: x"),
                 (f"Cookie: {signin.COOKIE}=made.up.cookie",)]
    for who in strangers:
        for path in CHAT_ROUTES:
            answer = _answered_before_the_body(gateway, _head(
                "POST", path, "Content-Type: application/json", *who))
            assert _unauthorized(answer) == "unauthorized", (who, path)
        chunked = _answered_before_the_body(gateway, _head(
            "PATCH", "/api/sessions/somebody", "Content-Type: application/json", *who,
            length=None))
        assert _unauthorized(chunked) == "unauthorized"


def test_the_openai_routes_refuse_a_stranger_in_openais_shape_before_the_body(
        gateway: Gateway) -> None:
    """/v1 takes bodies up to 64 MB (images inline): before, a stranger's 60 MB was read
    whole; now it is 401 `invalid_api_key` in OpenAI's shape before a byte of it, the
    dashboard's cookie counting for nothing there."""
    for who in ((), ("Authorization: Bearer not-the-token",),
                (f"Cookie: {signin.COOKIE}={signin.issue(TOKEN)}",)):
        answer = _answered_before_the_body(gateway, _head(
            "POST", "/v1/chat/completions", "Content-Type: application/json", *who,
            length=60_000_000))
        assert answer.status == 401
        error = answer.json()["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"


def _rss_bytes(gw: Gateway) -> int:
    assert gw.proc is not None
    with open(f"/proc/{gw.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_strangers_pushing_bodies_hold_none_of_the_gateways_memory(gateway: Gateway) -> None:
    """Four connections without a token each push 32 MB of a declared 60 MB body at /v1.
    Before: the gateway read them all and held them (its RSS grew by more than 128 MB);
    now each is refused at its headers and closed, so nothing of them is held."""
    before = _rss_bytes(gateway)
    socks = [connect(gateway.port) for _ in range(4)]
    piece = b"a" * (1024 * 1024)
    try:
        for sock in socks:
            sock.sendall(_head("POST", "/v1/chat/completions",
                               "Content-Type: application/json", length=60_000_000))
            try:
                for _ in range(32):
                    sock.sendall(piece)
            except OSError:  # refused and closed: the rest of the body is never read
                pass
        time.sleep(0.5)
        grew = _rss_bytes(gateway) - before
    finally:
        for sock in socks:
            sock.close()
    assert grew < 24 * 1024 * 1024, f"the gateway's memory grew by {grew / 2**20:.0f} MB"


def test_a_proven_senders_body_is_bounded_before_it_is_read_and_timed_as_it_comes(
        gateway: Gateway) -> None:
    """With the token: a body declared over the route's bound is 413 before it is sent (an
    upload's bound is one file's, `[attachments] max_file_mb`); one that stops coming is
    408 within the time limit, and closed."""
    token = f"Authorization: Bearer {TOKEN}"
    too_big = _answered_before_the_body(gateway, _head(
        "POST", "/api/sessions", "Content-Type: application/json", token))
    assert too_big.status == 413 and too_big.json()["error"]["code"] == "request_too_large"
    file = _answered_before_the_body(gateway, _head(
        "POST", "/api/sessions/somebody/attachments", token, length=2 * 1024 * 1024))
    assert file.status == 413 and file.json()["error"]["code"] == "attachment_too_large"
    with connect(gateway.port) as sock:
        sock.sendall(_head("POST", "/v1/chat/completions", "Content-Type: application/json",
                           token, length=1000) + b'{"model": "')
        raw, took = until_closed(sock, LIMIT + SLACK)
    assert parsed(raw).status == 408 and LIMIT * 0.8 <= took < LIMIT + SLACK


def test_the_routes_open_by_design_keep_their_own_bounds(gateway: Gateway) -> None:
    """The sign-in takes a form of a few bytes (over its bound: 413 before the body); the
    signed channels' doors are 404 before the body while their channel is not set up
    (before: their 64 MB was read first); the sign-in itself still works."""
    big_form = _answered_before_the_body(gateway, _head(
        "POST", "/login", "Content-Type: application/x-www-form-urlencoded",
        length=limits.OPEN["/login"].max_bytes + 1))
    assert big_form.status == 413
    for door in ("/channels/webhook", "/channels/slack/events", "/channels/slack/actions"):
        answer = _answered_before_the_body(gateway, _head(
            "POST", door, "Content-Type: application/json", length=60_000_000))
        assert answer.status == 404 and answer.json()["error"]["code"] == "not_found", door
    signed_in = httpx.post(f"{gateway.url}/login", data={"token": TOKEN}, timeout=10)
    assert signed_in.status_code == 303 and signin.COOKIE in signed_in.cookies


def test_census_every_route_open_to_anyone_that_takes_a_body_has_its_own_bound(
        tmp_path: Path) -> None:
    """Each route no token opens (`PUBLIC` in the permissions' table) and whose method
    carries a body is in `limits.OPEN`, and each entry there is such a route: a new open
    door cannot be given the authenticated routes' bounds by forgetting it."""
    app = create_app(Home(tmp_path / "census"), Config())
    try:
        open_doors = {path for (method, path), permission in ROUTE_PERMISSIONS.items()
                      if permission == PUBLIC and method not in limits.UNREAD}
        assert open_doors == set(limits.OPEN)
        served = {(method, context.path) for context in iter_route_contexts(app.routes)
                  for method in context.methods or ()}
        assert {("POST", path) for path in limits.OPEN} <= served
    finally:
        app.state.engine.db.close()


@pytest.fixture(autouse=True)
def _gateway_still_serves(gateway: Gateway) -> Iterator[None]:
    """Each test leaves the gateway answering (a refusal never takes it down)."""
    yield
    assert httpx.get(f"{gateway.url}/healthz", timeout=5).status_code == 200
