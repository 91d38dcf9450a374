"""The frame around every page (web/pages/frame.py): chats grouped by date, the theme cookie, and
errors a browser sees as pages (never raw JSON) while the API and scripts keep the envelope,
and a page that would show the owner's chats is never drawn for someone not signed in."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from fastapi.testclient import TestClient

from hearth.engine.reads.sidebar import SidebarChat
from hearth.web.pages.frame import THEME_COOKIE, grouped
from tests.support.dashboard import main_of, sign_in

HTML = {"Accept": "text/html,application/xhtml+xml"}


def _chat(key: str, when: datetime, pinned: bool = False) -> SidebarChat:
    return SidebarChat(key=key, title=key, opening=None, memory_mode="persistent",
                       pinned=pinned, updated_at=when.timestamp(), running=False,
                       waiting=False)


def test_chats_are_grouped_pinned_first_then_by_day_then_by_month() -> None:
    today = date(2026, 12, 1)
    noon = datetime(2026, 12, 1, 12, 0)
    chats = [_chat("pin", noon - timedelta(days=40), pinned=True),
             _chat("now", noon), _chat("late-yesterday", noon - timedelta(hours=13)),
             _chat("three-days", noon - timedelta(days=3)),
             _chat("six-days", noon - timedelta(days=6)),
             _chat("november", noon - timedelta(days=10)),
             _chat("october", noon - timedelta(days=45)),
             _chat("last-year", noon - timedelta(days=400))]
    groups = [(g.label, [c.key for c in g.chats]) for g in grouped(chats, today)]
    assert groups == [("Pinned", ["pin"]), ("Today", ["now"]),
                      ("Yesterday", ["late-yesterday"]),
                      ("Previous 7 days", ["three-days", "six-days"]),
                      ("November 2026", ["november"]), ("October 2026", ["october"]),
                      ("October 2025", ["last-year"])]


def test_an_unknown_chat_is_a_page_for_a_browser_and_the_envelope_for_a_script(
        client: TestClient) -> None:
    csrf = sign_in(client)
    page = client.get("/chats/no-such-chat", headers=HTML)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "Not found" in page.text and 'href="/chats"' in main_of(page.text)
    assert "Temporary chat that ended" in page.text
    script = client.get("/chats/no-such-chat",
                        headers={**HTML, "X-Requested-With": "fetch", "X-CSRF-Token": csrf})
    assert script.json()["error"]["code"] == "session_not_found"
    api = client.get("/api/sessions/no-such-chat", headers=HTML)
    assert api.json()["error"]["code"] == "session_not_found"  # the API is never a page
    nowhere = client.get("/no/such/page", headers=HTML)
    assert nowhere.status_code == 404 and "There is no page at this address." in nowhere.text


def test_a_stranger_gets_no_sidebar_on_an_error(client: TestClient) -> None:
    csrf = sign_in(client)
    made = client.post("/chats/new", data={"text": "My secret plans", "csrf": csrf})
    assert made.status_code == 303
    client.cookies.clear()
    for path in ("/no/such/page", "/chats/no-such-chat"):
        answer = client.get(path, headers=HTML)
        assert "My secret plans" not in answer.text and "sidebar" not in answer.text


def test_the_theme_is_a_cookie_the_page_is_drawn_in(client: TestClient) -> None:
    csrf = sign_in(client)
    assert 'data-theme="system"' in client.get("/").text
    chosen = client.post("/theme", data={"theme": "dark", "csrf": csrf, "back": "/chats"})
    assert chosen.status_code == 303 and chosen.headers["location"] == "/chats"
    assert THEME_COOKIE in chosen.headers["set-cookie"]
    page = client.get("/chats").text
    assert 'data-theme="dark"' in page
    assert 'value="dark" aria-pressed="true"' in page
    away = client.post("/theme", data={"theme": "light", "csrf": csrf,
                                       "back": "https://evil.example/"})
    assert away.headers["location"] == "/"  # never back to another site
    bad = client.post("/theme", data={"theme": "purple", "csrf": csrf},
                      headers={"X-Requested-With": "fetch"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_theme"
    forged = client.post("/theme", data={"theme": "dark"})
    assert forged.status_code == 403
