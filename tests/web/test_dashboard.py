"""The dashboard's first slice: sign-in with an HttpOnly SameSite=Strict cookie, CSRF on every
change a cookie makes, the Origin check, the security headers, the chat list and a chat's page
(modes said, every piece of text escaped). In-process, through Starlette's TestClient."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from hearth.config import Config
from hearth.web.http import signin
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.dashboard import dashboard, sign_in, token_of

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:x()">l</a>'


def test_a_page_asks_to_sign_in_and_the_api_still_answers_401(client: TestClient) -> None:
    assert client.get("/").status_code == 303
    assert client.get("/").headers["location"] == "/login"
    page = client.get("/login")
    assert page.status_code == 200 and 'type="password"' in page.text
    api = client.get("/api/sessions")
    assert api.status_code == 401 and api.json()["error"]["code"] == "unauthorized"


def test_signing_in_sets_an_httponly_strict_cookie_only_for_the_right_token(
        client: TestClient) -> None:
    wrong = client.post("/login", data={"token": "not-it"})
    assert wrong.status_code == 401 and "not this gateway" in wrong.text
    assert signin.COOKIE not in client.cookies
    right = client.post("/login", data={"token": token_of(client)})
    set_cookie = right.headers["set-cookie"].lower()
    assert "httponly" in set_cookie and "samesite=strict" in set_cookie
    assert client.get("/").status_code == 200
    assert client.get("/login").status_code == 303  # signed in already


def test_a_cookie_from_another_token_or_forged_is_refused() -> None:
    cookie = signin.issue("token-a")
    assert signin.valid("token-a", cookie)
    assert not signin.valid("token-b", cookie)
    assert not signin.valid("token-a", cookie[:-1] + ("0" if cookie[-1] != "0" else "1"))
    assert not signin.valid("token-a", signin.issue("token-a", now=0))  # expired


def test_every_change_a_cookie_makes_needs_the_csrf_token(client: TestClient) -> None:
    csrf = sign_in(client)
    refused = client.post("/chats/new", data={"memory_mode": "persistent", "text": "hi"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    api_refused = client.post("/api/sessions", json={})
    assert api_refused.status_code == 403
    made = client.post("/chats/new", data={"memory_mode": "persistent", "text": "hi",
                                           "csrf": csrf})
    assert made.status_code == 303 and made.headers["location"].startswith("/chats/chat-")
    by_header = client.post("/api/sessions", json={}, headers={"X-CSRF-Token": csrf})
    assert by_header.status_code == 201
    other_site = client.post("/api/sessions", json={},
                             headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example"})
    assert other_site.status_code == 403
    assert other_site.json()["error"]["code"] == "forbidden_origin"
    opaque = client.post("/chats/new", data={"memory_mode": "persistent", "text": "hi",
                                             "csrf": csrf},
                         headers={"Origin": "null"})  # a sandboxed or privacy-stripped page
    assert opaque.status_code == 403


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for answer in (client.get("/login"), client.get("/healthz"), client.get("/api/sessions")):
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"


def _main(page: str) -> str:
    """The page's own part, without the sidebar around it."""
    return page.split('<main id="main"', 1)[1]


def _sidebar(page: str) -> str:
    return page.split('<aside class="sidebar"', 1)[1].split("</aside>", 1)[0]


def test_the_list_shows_kept_chats_only_and_a_chat_says_its_mode(client: TestClient) -> None:
    csrf = sign_in(client)
    kept = client.post("/chats/new", data={"memory_mode": "persistent", "text": "kept one",
                                           "csrf": csrf})
    hidden = client.post("/chats/new", data={"memory_mode": "incognito", "text": "hidden one",
                                             "csrf": csrf})
    kept_key = kept.headers["location"].rsplit("/", 1)[1]
    hidden_key = hidden.headers["location"].rsplit("/", 1)[1]
    listing = client.get("/chats").text
    assert kept_key in _main(listing) and hidden_key not in _main(listing)
    found = client.get("/chats", params={"q": hidden_key}).text
    assert f'href="/chats/{hidden_key}"' not in _main(found)  # never found by search either
    side = _sidebar(listing)  # the sidebar keeps the Incognito chat apart, to find and end it
    restricted = side.split("Incognito and Temporary", 1)[1].split("</ul>", 1)[0]
    assert hidden_key in restricted and kept_key not in restricted
    assert side.index("Incognito and Temporary") < side.index(kept_key)  # first, not buried
    start = client.get("/").text
    assert 'value="incognito"' in start and 'value="temporary"' in start
    assert "No model is set up" in start  # the first-run path: this gateway has none
    page = client.get(hidden.headers["location"])
    assert page.status_code == 200 and "<strong>Incognito chat</strong>" in page.text
    assert "Kept, never learned from." in page.text


def test_a_new_chat_is_made_only_with_its_first_message_and_once(client: TestClient) -> None:
    csrf = sign_in(client)
    before = client.get("/api/sessions", headers={"X-CSRF-Token": csrf}).json()["sessions"]
    empty = client.post("/chats/new", data={"memory_mode": "persistent", "text": "  ",
                                            "csrf": csrf})
    assert empty.status_code == 422 and "first message" in empty.text
    assert "<html" in empty.text  # the page again, with the sentence, not JSON
    form = {"memory_mode": "persistent", "text": "only once", "csrf": csrf,
            "client_message_id": "a" * 32}
    first, again = (client.post("/chats/new", data=form) for _ in range(2))
    assert first.headers["location"] == again.headers["location"]  # a double click: one chat
    after = client.get("/api/sessions", headers={"X-CSRF-Token": csrf}).json()["sessions"]
    assert len(after) == len(before) + 1
    key = first.headers["location"].rsplit("/", 1)[1]
    texts = [m["text"] for m in client.get(f"/api/sessions/{key}").json()["messages"]
             if m["kind"] == "user"]
    assert texts == ["only once"]


def test_hostile_text_is_rendered_inert(client: TestClient) -> None:
    csrf = sign_in(client)
    headers = {"X-CSRF-Token": csrf}
    key = client.post("/api/sessions", json={}, headers=headers).json()["key"]
    assert client.patch(f"/api/sessions/{key}", json={"title": HOSTILE},
                        headers=headers).status_code == 200
    sent = client.post(f"/api/sessions/{key}/messages", json={"text": HOSTILE}, headers=headers)
    assert sent.status_code == 202
    for page in (client.get("/chats").text, client.get(f"/chats/{key}").text):
        assert "<script>alert" not in page and "<img" not in page
        assert 'href="javascript:' not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_signing_out_ends_the_cookie(client: TestClient) -> None:
    csrf = sign_in(client)
    out = client.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert client.get("/").status_code == 303


def test_the_composer_sends_once_however_often_the_form_is_posted(client: TestClient) -> None:
    csrf = sign_in(client)
    made = client.post("/chats/new", data={"memory_mode": "persistent", "text": "first",
                                           "csrf": csrf})
    page = client.get(made.headers["location"]).text
    assert 'src="/static/composer.js?v=' in page and 'name="client_message_id"' in page
    message_id = page.split('name="client_message_id" value="', 1)[1].split('"', 1)[0]
    key = made.headers["location"].rsplit("/", 1)[1]
    form = {"text": "hello from the page", "client_message_id": message_id, "csrf": csrf}
    for _ in range(2):  # a double click, or a resend after a dropped connection
        sent = client.post(f"/chats/{key}/send", data=form)
        assert sent.status_code == 303 and sent.headers["location"] == f"/chats/{key}"
    texts = [m["text"] for m in client.get(f"/api/sessions/{key}").json()["messages"]
             if m["kind"] == "user"]
    assert texts == ["first", "hello from the page"]
    refused = client.post(f"/chats/{key}/send", data={**form, "csrf": "forged"})
    assert refused.status_code == 403
    empty = client.post(f"/chats/{key}/send", data={"text": " ", "csrf": csrf})
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "empty_message"
    assert client.get("/static/composer.js").status_code == 200


HOSTILE_MARKDOWN = (
    "**Done.** [ok](https://example.org) [bad](javascript:alert(1)) "
    "[worse](JaVaScRiPt:alert(2)) <script>alert(3)</script> "
    '<img src=x onerror="alert(4)"> ![pic](data:text/html,<b>x</b>) `<i>code</i>`'
)


def test_the_answer_is_markdown_rendered_inert(tmp_path: Path,
                                               model_server: ScriptedModelServer) -> None:
    config = Config.model_validate({"models": [{
        "id": "fake", "provider": "openai", "base_url": model_server.openai_base_url,
        "api_key": "sk-test", "model": "fake-model"}]})
    model_server.push(Reply(text=HOSTILE_MARKDOWN))
    with dashboard(tmp_path / "home", config) as client:
        csrf = sign_in(client)
        headers = {"X-CSRF-Token": csrf}
        key = client.post("/api/sessions", json={}, headers=headers).json()["key"]
        run = client.post(f"/api/sessions/{key}/messages", json={"text": "go"},
                          headers=headers).json()["run_id"]
        assert client.get(f"/api/runs/{run}/wait").json()["status"] == "complete"
        page = client.get(f"/chats/{key}").text
    assert "<strong>Done.</strong>" in page and '<a href="https://example.org">ok</a>' in page
    assert "<code>&lt;i&gt;code&lt;/i&gt;</code>" in page
    lowered = page.lower()
    assert "javascript:" not in lowered.replace("[bad](javascript:", "").replace(
        "[worse](javascript:", "")  # only as plain text, never as a link
    assert 'href="javascript' not in lowered and "<script>alert" not in page
    assert "<img" not in page and "onerror=" not in page.replace("onerror=&quot;", "")


def test_an_untitled_chat_is_called_by_its_first_words(client: TestClient) -> None:
    csrf = sign_in(client)
    headers = {"X-CSRF-Token": csrf}
    words = "Plan the <b>trip</b> to Lisbon next spring:\n a list of bakeries and museums to see"
    untitled = client.post("/api/sessions", json={}, headers=headers).json()["key"]
    titled = client.post("/api/sessions", json={}, headers=headers).json()["key"]
    client.patch(f"/api/sessions/{titled}", json={"title": "Kept name"}, headers=headers)
    for key in (untitled, titled):
        sent = client.post(f"/api/sessions/{key}/messages", json={"text": words},
                           headers=headers)
        assert sent.status_code == 202
    empty = client.post("/api/sessions", json={}, headers=headers).json()["key"]
    shown = "Plan the &lt;b&gt;trip&lt;/b&gt; to Lisbon next spring: a list of baker…"
    listing = client.get("/chats").text
    assert shown in listing and "Kept name" in listing and empty in listing
    assert f'<h1 class="page-title">{shown}</h1>' in client.get(f"/chats/{untitled}").text
    assert '<h1 class="page-title">Kept name</h1>' in client.get(f"/chats/{titled}").text


def test_a_page_names_each_static_file_by_its_content_and_the_browser_always_asks_again(
        client: TestClient) -> None:
    """A gateway upgraded must never have its new pages drawn with an old stylesheet a
    browser kept (the chat map's rail once drew as large circles that way)."""
    import hashlib
    import re

    from hearth.web.pages.ui import STATIC

    sign_in(client)
    page = client.get("/").text
    named = dict(re.findall(r'/static/([a-z_]+\.(?:css|js|svg))\?v=([0-9a-f]{10})"', page))
    assert {"hearth.css", "shell.js", "hearth.svg"} <= set(named)
    for name, digest in named.items():
        assert digest == hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:10]
    first = client.get("/static/hearth.css")
    assert first.headers["cache-control"] == "no-cache" and first.headers["etag"]
    again = client.get("/static/hearth.css", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
