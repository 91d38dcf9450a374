"""Search in Chromium: the sidebar's box finds what was said (the owner's words and the
answers, never an Incognito chat's), the snippet's matched words are marked and a message's
markup stays inert, a folder narrows the results, and a result opens its chat at the message,
an old one (before the chat's newest page) included, scrolled into view. Screenshots of the
results in light and dark, on a desktop and on a 390 px phone, into test-artifacts/."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from hearth.home import Home  # noqa: E402
from hearth.store import sessions, transcript  # noqa: E402
from hearth.store.db import Database  # noqa: E402
from tests.browser.conftest import SCREENSHOTS  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway  # noqa: E402
from tests.support.browser import DESKTOP, Shot, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]
WORD = "lanternfig"
LONG = 260  # events in the long chat: more than the chat page's window of 200


def _talk(api: Api, server: ScriptedModelServer, said: str, answer: str) -> str:
    key = api.new_chat()
    server.push(Reply(text=answer))
    assert api.wait(api.send(key, said)["run_id"])["status"] == "complete"
    return key


def _long_chat(gateway: Gateway) -> None:
    """A kept chat of LONG messages, WORD in message 3 (before its newest page) and in
    message 100 (on it, far above its end), written into the gateway's database through the
    store (its triggers index it as the gateway's own appends are), from a thread of this
    test: Playwright's loop holds the main thread, where the store's blocking door refuses."""

    def write() -> None:
        db = Database(Home(gateway.home).database_url())
        with db.write() as conn:
            sessions.insert(conn, key="long-chat", tab_id="tab-long", memory_mode="persistent",
                            chat_number=None, title="A long chat")
            for seq in range(1, LONG + 1):
                said = f"the {WORD} again, message {seq}" if seq in (3, 100) else (
                    f"message {seq}: " + "words to fill the page. " * 6)
                transcript.append(conn, "long-chat", "user" if seq % 2 else "assistant",
                                  {"text": said})
        db.close()

    writer = threading.Thread(target=write)
    writer.start()
    writer.join()


def test_the_sidebar_search_finds_marks_filters_and_jumps_to_the_message(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    garden = _talk(api, model_server, f"Where do the {WORD} seeds go? "
                   "<script>window.__pwned = 1</script>", f"Plant the {WORD} seeds in spring.")
    assert api.http.patch(f"/api/sessions/{garden}",
                          json={"title": "Garden plans", "folder": "Garden"}).status_code == 200
    hidden = api.new_chat(memory_mode="incognito")
    model_server.push(Reply(text="Noted."))
    api.wait(api.send(hidden, f"my secret {WORD}")["run_id"])
    _long_chat(gateway)

    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    page.get_by_role("search").first.get_by_label("Search chats").fill(WORD)
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{gateway.url}/search?q={WORD}")
    results = page.locator(".search-results .search-hit")
    expect(results).to_have_count(4)  # the garden chat's two, the long chat's two
    expect(page.locator(".snippet mark").first).to_have_text(WORD)
    expect(page.locator(f".search-results a[href^='/chats/{hidden}']")).to_have_count(0)
    expect(page.get_by_text("<script>window.__pwned = 1</script>")).to_be_visible()
    assert page.evaluate("window.__pwned") is None  # drawn as text, never run
    path = page.url.removeprefix(gateway.url)
    shots(page, gateway, shot, path, "search-results")

    page.get_by_role("combobox", name="Folder", exact=True).select_option("Garden")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(results).to_have_count(2)
    expect(page.locator(".search-results .chat-title").first).to_have_text("Garden plans")

    page.goto(f"{gateway.url}/search?q={WORD}")
    old = page.locator(".search-results a[href*='#seq-3']")
    expect(old).to_have_attribute("href", "/chats/long-chat?before=4#seq-3")
    old.click()
    expect(page.locator("#seq-3")).to_be_in_viewport()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # the window only: the page is long
    page.screenshot(path=str(SCREENSHOTS / "search-jump-old.png"))
    page.goto(f"{gateway.url}/search?q={WORD}")
    recent = page.locator(".search-results a[href*='#seq-100']")
    expect(recent).to_have_attribute("href", "/chats/long-chat#seq-100")
    recent.click()
    expect(page.locator("html[data-stream=open]")).to_have_count(1)
    expect(page.locator("#seq-100")).to_be_in_viewport()  # not scrolled to the newest line
    expect(page.locator(f"#seq-{LONG}")).not_to_be_in_viewport()
    assert console_errors == []


