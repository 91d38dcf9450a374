"""Signing a Starlette TestClient in to the dashboard, as a browser would: the cookie, and the
CSRF token the page would carry (shared by the in-process dashboard tests)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from hearth.web import signin

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\ssrc=)")  # a script element without a src


def token_of(client: TestClient) -> str:
    return str(client.app.state.token)  # type: ignore[attr-defined]


def bearer(client: TestClient) -> dict[str, str]:
    """The API's auth header for the in-process gateway's token."""
    return {"Authorization": f"Bearer {token_of(client)}"}


def main_of(page: str) -> str:
    """A dashboard page's own part: what is inside <main>, without the sidebar around it."""
    return page.split('<main id="main"', 1)[1].split("</main>", 1)[0]


def sign_in(client: TestClient) -> str:
    """Sign in with the gateway's token; returns the page's CSRF token."""
    answer = client.post("/login", data={"token": token_of(client)})
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    return signin.csrf_for(token_of(client), client.cookies[signin.COOKIE])
