"""Signing out revokes the cookie: a copy of a signed-out cookie is refused on pages and on the
API, another page's sign-in goes on, and both a sign-in and a sign-out outlast a restart."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from hearth.web.http import signin
from tests.gateway import TOKEN, Gateway
from tests.support.dashboard import token_of


def _sign_in(client: TestClient) -> str:
    """A new sign-in's cookie (the client keeps no cookie of its own afterwards)."""
    answer = client.post("/login", data={"token": token_of(client)})
    assert answer.status_code == 303
    cookie = client.cookies[signin.COOKIE]
    client.cookies.clear()
    return cookie


def _as(cookie: str, csrf: str | None = None) -> dict[str, str]:
    headers = {"Cookie": f"{signin.COOKIE}={cookie}"}
    if csrf is not None:
        headers["X-CSRF-Token"] = csrf
    return headers


def test_a_copied_cookie_is_refused_once_its_page_signed_out(client: TestClient) -> None:
    """Before: /logout only told the browser to drop the cookie; the cookie was an HMAC of its
    issue time keyed by the token, so a copy taken earlier still opened every page and API
    route (GET / answered 200, POST /api/sessions 201) for the rest of its 30 days."""
    token = token_of(client)
    copied, other = _sign_in(client), _sign_in(client)
    assert client.get("/", headers=_as(copied)).status_code == 200
    out = client.post("/logout", data={"csrf": signin.csrf_for(token, copied)},
                      headers=_as(copied))
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert f'{signin.COOKIE}=""' in out.headers["set-cookie"]

    page = client.get("/", headers=_as(copied))
    assert page.status_code == 303 and page.headers["location"] == "/login"
    assert client.get("/login", headers=_as(copied)).status_code == 200  # the sign-in form
    listed = client.get("/api/sessions", headers=_as(copied))
    assert listed.status_code == 401 and listed.json()["error"]["code"] == "unauthorized"
    assert "signed out" in listed.json()["error"]["message"]
    made = client.post("/api/sessions", json={},
                       headers=_as(copied, signin.csrf_for(token, copied)))
    assert made.status_code == 401

    assert client.get("/", headers=_as(other)).status_code == 200  # another page is still in
    assert client.post("/api/sessions", json={},
                       headers=_as(other, signin.csrf_for(token, other))).status_code == 201


def test_signing_out_needs_the_pages_csrf_token(client: TestClient) -> None:
    """A sign-out is a change like any other: another site cannot sign the owner out."""
    cookie = _sign_in(client)
    refused = client.post("/logout", headers=_as(cookie))
    assert refused.status_code == 403
    assert client.get("/", headers=_as(cookie)).status_code == 200


def test_a_forged_cookie_with_a_fresh_signature_but_no_sign_in_is_refused(
        client: TestClient) -> None:
    """A cookie signed with the token but never signed in (as a token holder could make, or
    one from before this change) opens nothing."""
    never = signin.issue(token_of(client))
    assert signin.valid(token_of(client), never)
    assert client.get("/", headers=_as(never)).status_code == 303
    assert client.get("/api/sessions", headers=_as(never)).status_code == 401


def _login(gateway: Gateway) -> str:
    answer = httpx.post(f"{gateway.url}/login", data={"token": TOKEN}, timeout=10)
    assert answer.status_code == 303
    return answer.cookies[signin.COOKIE]


def _page_status(gateway: Gateway, cookie: str) -> int:
    return httpx.get(f"{gateway.url}/api/sessions", headers=_as(cookie), timeout=10).status_code


def test_a_sign_in_and_a_sign_out_both_outlast_a_restart(gateway: Gateway) -> None:
    kept, ended = _login(gateway), _login(gateway)
    out = httpx.post(f"{gateway.url}/logout", headers=_as(ended),
                     data={"csrf": signin.csrf_for(TOKEN, ended)}, timeout=10)
    assert out.status_code == 303
    assert (_page_status(gateway, kept), _page_status(gateway, ended)) == (200, 401)
    gateway.stop()
    gateway.start()
    assert (_page_status(gateway, kept), _page_status(gateway, ended)) == (200, 401)
    page = httpx.get(f"{gateway.url}/", headers=_as(kept), timeout=10)
    assert page.status_code == 200
