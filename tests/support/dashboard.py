"""The dashboard as the tests drive it. In process: `dashboard`, the gateway's app on a home
under Starlette's TestClient, and signing that client in as a browser would (`sign_in`: the
cookie and the CSRF token the page would carry; `bearer`, the API's header). Over real HTTP:
`Page`, a signed-in browser's view of a running gateway. And `main_of`, a page's own part;
`badge_of` and `shown_buttons`, a chat page's "Answers on …" badge and its link menu's items;
`api_chat` and `api_turn`, a chat made and one message sent over the in-process API (its
run waited for), and `store_of`, the in-process gateway's database."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from hearth.config import Config
from hearth.home import Home
from hearth.store.db import Database
from hearth.web.app import create_app
from hearth.web.http import signin
from tests.gateway import TOKEN, Gateway
from tests.support.store import seed_home

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\ssrc=)")  # a script element without a src
FETCH = {"X-Requested-With": "fetch"}  # what the page's script sends with a form


@contextmanager
def dashboard(home: Path, config: Config | None = None, *,
              csrf: bool = False) -> Iterator[TestClient]:
    """The gateway's app on `home` (with `config`, or the defaults) under TestClient, started
    for the block and stopped after it; redirects are not followed. With `csrf`, signed in and
    sending the page's CSRF token with every request."""
    seed_home(home)  # the template store (tests/support/store.py), not a migration
    app = create_app(Home(home), Config() if config is None else config)
    with TestClient(app, follow_redirects=False) as client:
        if csrf:
            client.headers["X-CSRF-Token"] = sign_in(client)
        yield client


def token_of(client: TestClient) -> str:
    return str(client.app.state.token)  # type: ignore[attr-defined]


def bearer(client: TestClient) -> dict[str, str]:
    """The API's auth header for the in-process gateway's token."""
    return {"Authorization": f"Bearer {token_of(client)}"}


def store_of(client: TestClient) -> Database:
    """The in-process gateway's database, for a test to read what it wrote."""
    db: Database = client.app.state.engine.db  # type: ignore[attr-defined]
    return db


def api_chat(client: TestClient, **body: Any) -> str:
    """A new chat made over the API with `body`; its key."""
    made = client.post("/api/sessions", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def api_turn(client: TestClient, key: str, words: str) -> dict[str, Any]:
    """`words` sent to chat `key` over the API (the client's own headers); the run's view once
    it has ended (or after 20 s)."""
    sent = client.post(f"/api/sessions/{key}/messages", json={"text": words})
    assert sent.status_code == 202, sent.text
    ended: dict[str, Any] = client.get(f"/api/runs/{sent.json()['run_id']}/wait",
                                       params={"timeout": 20}).json()
    return ended


def main_of(page: str) -> str:
    """A dashboard page's own part: what is inside <main>, without the sidebar around it."""
    return page.split('<main id="main"', 1)[1].split("</main>", 1)[0]


def badge_of(page: str) -> str:
    """The top bar's badge: its words, or "" when hidden."""
    found = re.search(r'<span class="link-badge" id="link-badge"[^>]*?( hidden)?>\s*'
                      r'<span class="link-dot" aria-hidden="true"></span>'
                      r'<span class="link-words">(.*?)</span>\s*</span>', page, re.S)
    assert found is not None, "the chat page has no link badge"
    words = html.unescape(re.sub(r"<[^>]+>", "", found.group(2))).strip()
    return "" if found.group(1) else words


def shown_buttons(page: str) -> list[str]:
    """The labels of the link menu's buttons that are not hidden."""
    menu = re.search(r"<div class=\"menu-section link-menu.*?</div>\s*<p", page, re.S)
    if menu is None:
        return []
    return [html.unescape(label) for attrs, label in
            re.findall(r"<button ([^>]*)>([^<]*)</button>", menu.group(0))
            if " hidden" not in attrs]


def sign_in(client: TestClient) -> str:
    """Sign in with the gateway's token; returns the page's CSRF token."""
    answer = client.post("/login", data={"token": token_of(client)})
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    return signin.csrf_for(token_of(client), client.cookies[signin.COOKIE])


class Page:
    """A signed-in browser's view of the gateway: the cookie, the CSRF token, the page."""

    def __init__(self, gateway: Gateway) -> None:
        self.http = httpx.Client(base_url=gateway.url, follow_redirects=False, timeout=30)
        assert self.http.post("/login", data={"token": TOKEN}).status_code == 303
        self.csrf = signin.csrf_for(TOKEN, self.http.cookies[signin.COOKIE])

    def html(self, key: str) -> str:
        answer = self.http.get(f"/chats/{key}")
        assert answer.status_code == 200, answer.text
        return answer.text

    def post(self, path: str, headers: dict[str, str] | None = None,
             **form: str) -> httpx.Response:
        """A form the page's script sends (FETCH), or with `headers` as a browser would."""
        return self.http.post(path, data={"csrf": self.csrf, **form},
                              headers=FETCH if headers is None else headers)

    def frames(self, key: str, after: int, until: Callable[[dict[str, Any]], bool]
               ) -> list[dict[str, Any]]:
        """The chat's live frames after `after`, read until `until(frame)`."""
        got: list[dict[str, Any]] = []
        with self.http.stream("GET", f"/chats/{key}/stream", params={"after": after}) as answer:
            assert answer.status_code == 200
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    if until(got[-1]):
                        break
        return got
