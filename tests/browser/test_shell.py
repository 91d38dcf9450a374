"""The dashboard's shell in Chromium: the sidebar (grouped, the current chat marked, a chat
waiting on you marked, the restricted chats apart) and its phone drawer, a long chat that
opens at its newest line and follows a streaming answer unless the reader scrolled up (then a
"Jump to latest" button), the "Thinking…" line while a turn is silent, the chat's menu
(rename, model and agent, archive and restore, export, delete after a page that says what
goes), the theme toggle (remembered, and working without scripts), an unknown chat as a page,
and no page scrolling sideways at 390 px. Screenshots of each into test-artifacts/."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Browser, Page, expect  # noqa: E402

from tests.browser.conftest import TIMEOUT_MS  # noqa: E402
from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Api, Gateway  # noqa: E402
from tests.support.approvals import pending_in  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]
PHONE = {"width": 390, "height": 844}
SECOND_MODEL = """
[[models]]
id = "other"
provider = "openai"
base_url = "{url}"
api_key = "sk-test"
model = "other-model"

[agents.coder]
system_prompt = "You write code."
"""


def _chat(api: Api, model_server: ScriptedModelServer, words: str, answer: str = "Sure.") -> str:
    """A chat of one exchange, titled (by its title chore) with its own words."""
    key = api.new_chat()
    model_server.push(Reply(text=answer))
    model_server.push_chore(Reply(text=words), kind="title")
    api.wait(api.send(key, words)["run_id"])
    return key


def _open(page: Page, gateway: Gateway, key: str) -> None:
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)


def _at_bottom(page: Page) -> bool:
    return bool(page.evaluate(
        "window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80"))


@contextmanager
def _page_in(browser: Browser, **options: Any) -> Iterator[Page]:
    """A page in a fresh browser context made with `options`, closed afterwards."""
    context = browser.new_context(**options)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _sign_in(page: Page, gateway: Gateway) -> None:
    page.goto(f"{gateway.url}/login")
    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="New chat")).to_be_visible()


# --------------------------------------------------------------------------- the sidebar


def test_the_sidebar_groups_marks_and_keeps_restricted_chats_apart(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    pinned = _chat(api, model_server, "A pinned plan")
    filed = {"pinned": True, "folder": "Home", "tags": ["plans"]}
    assert api.http.patch(f"/api/sessions/{pinned}", json=filed).status_code == 200
    today = _chat(api, model_server, "Lentil recipes")
    hidden = api.new_chat(memory_mode="incognito")
    model_server.push(Reply(text="ok"))
    api.wait(api.send(hidden, "A private question")["run_id"])
    waiting = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Written."))
    api.send(waiting, "Write a.txt")
    pending_in(api, waiting, timeout=10)
    page = signed_in(gateway)
    labels = page.locator(".chat-nav .group-label")  # the private chats first, then folders
    expect(labels.first).to_have_text("Incognito and Temporary")
    expect(labels.nth(1)).to_have_text("Folders")
    groups = page.locator(".chat-nav h2.group-label:not(.restricted-label)")
    expect(groups.first).to_have_text("Pinned")
    expect(groups.nth(1)).to_have_text("Today")
    pinned_links = page.locator(".chat-nav h2:not(.restricted-label) + .chat-links").first \
        .locator("a")
    expect(pinned_links).to_have_count(1)
    expect(pinned_links).to_have_attribute("href", f"/chats/{pinned}")
    expect(page.locator(f".chat-link[href='/chats/{waiting}'] .pill.waiting")).to_be_visible()
    expect(page.locator(".page-nav .count")).to_have_text("1")  # one call waits on you
    for filter_link in ("/chats?folder=Home", "/chats?tag=plans"):  # the filing, a click away
        expect(page.locator(f".filing-nav a[href='{filter_link}']")).to_have_count(1)
    restricted = page.locator(".chat-links.restricted a")
    expect(restricted).to_have_count(1)
    expect(restricted).to_have_attribute("href", f"/chats/{hidden}")
    _open(page, gateway, today)
    expect(page.locator(f".chat-link[href='/chats/{today}']")).to_have_attribute(
        "aria-current", "page")
    expect(page.get_by_role("heading", level=1)).to_have_text("Lentil recipes")
    shot(page, "shell-sidebar")
    page.get_by_role("button", name="Hide the sidebar").click()
    expect(page.locator(".sidebar")).to_be_hidden()
    page.reload()  # remembered
    expect(page.locator(".sidebar")).to_be_hidden()
    page.get_by_role("button", name="Show the sidebar").click()
    expect(page.locator(".sidebar")).to_be_visible()
    assert console_errors == []


def test_on_a_phone_the_sidebar_is_a_drawer(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer,
        shot: Shot) -> None:
    key = _chat(gateway.client(), model_server, "Plan a weekend in Lisbon")
    for scripts in (True, False):  # the drawer opens without the scripts too (#sidebar)
        with _page_in(browser, viewport=PHONE, java_script_enabled=scripts) as page:
            _sign_in(page, gateway)
            page.goto(f"{gateway.url}/chats/{key}")
            drawer = page.locator(".sidebar")
            expect(drawer).not_to_be_in_viewport()
            page.get_by_role("link", name="Open the chat list").click()
            expect(drawer).to_be_in_viewport()
            if scripts:
                shot(page, "shell-phone-drawer")
            page.get_by_role("link", name="Close the chat list").click()
            expect(drawer).not_to_be_in_viewport()


# --------------------------------------------------------------------------- the chat page


def test_a_long_chat_opens_at_its_end_and_follows_unless_scrolled_up(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    key = api.new_chat()
    for turn in range(12):
        model_server.push(Reply(text=f"Answer {turn}.\n\n" + "A line of text. " * 40))
        api.wait(api.send(key, f"Question {turn}")["run_id"])
    page = signed_in(gateway)
    _open(page, gateway, key)
    assert _at_bottom(page)  # the newest line, not the top
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_hidden()

    model_server.push(Reply(text="Streaming " + "word " * 200, chunks=40, delay=0.05))
    api.send(key, "one more")
    expect(page.locator("#streaming")).to_have_count(1)
    page.wait_for_timeout(300)
    assert _at_bottom(page)  # it follows the answer as it grows

    page.mouse.wheel(0, -3000)  # the reader scrolls up to read
    page.wait_for_timeout(300)
    held = page.evaluate("window.scrollY")
    expect(jump).to_be_visible()
    page.wait_for_timeout(500)
    assert page.evaluate("window.scrollY") == held  # not dragged back down
    shot(page, "chat-jump-to-latest")
    jump.click()
    expect(jump).to_be_hidden()
    page.wait_for_timeout(400)
    assert _at_bottom(page)
    expect(page.locator(".item.assistant").last.locator(".copy")).to_have_count(1)
    assert console_errors == []


def test_a_silent_turn_says_thinking_then_what_it_waits_for(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    release = threading.Event()
    model_server.push(Reply(text="Here.", hold=release),
                      Reply(tool_calls=[Call("write_file", {"path": "n.txt", "content": "hi"})]),
                      Reply(text="Written."))
    page = signed_in(gateway)
    _open(page, gateway, key)
    api.send(key, "think first")
    status = page.locator("#turn-status")
    expect(status).to_contain_text("Thinking…")
    expect(status.locator(".elapsed")).to_have_text("1 s", timeout=4000)  # time counts
    shot(page, "chat-thinking")
    release.set()
    expect(page.locator(".item.assistant .markdown")).to_have_text("Here.")
    expect(status).to_be_hidden()
    api.send(key, "now write")
    expect(status).to_contain_text("Waiting for your answer")
    expect(page.locator(".approval .preview")).to_contain_text("n.txt")  # what it will do
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator(".item.assistant .markdown").last).to_have_text("Written.")
    expect(status).to_be_hidden()
    assert console_errors == []


def test_copy_puts_the_answer_and_the_code_on_the_clipboard(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer) -> None:
    key = _chat(gateway.client(), model_server, "code please",
                "Here:\n\n```python\nprint('hi')\n```\n\nDone.")
    with _page_in(browser, permissions=["clipboard-read", "clipboard-write"]) as page:
        _sign_in(page, gateway)
        _open(page, gateway, key)
        page.get_by_role("button", name="Copy the code").click()
        assert page.evaluate("navigator.clipboard.readText()") == "print('hi')"
        page.get_by_role("button", name="Copy the answer").click()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("Here:") and copied.endswith("Done.")


# --------------------------------------------------------------------------- the chat's menu


def test_the_menu_renames_sets_model_and_agent_archives_and_exports(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: SignedIn, shot: Shot, console_errors: list[str]) -> None:
    gateway = gateway_factory(SECOND_MODEL.format(url=model_server.openai_base_url))
    api = gateway.client()
    key = _chat(api, model_server, "Draft a letter")
    page = signed_in(gateway)
    _open(page, gateway, key)
    menu = page.get_by_label("Chat options", exact=True).first
    menu.click()
    shot(page, "chat-menu")
    page.get_by_label("Title").fill("Letter to the landlord")
    page.get_by_role("button", name="Rename").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Letter to the landlord")
    expect(page.locator(f".chat-link[href='/chats/{key}']")).to_contain_text("Letter to")

    menu.click()
    page.get_by_label("Model").select_option("other")
    page.get_by_label("Agent").select_option("coder")
    page.get_by_role("button", name="Save").click()
    session = api.http.get(f"/api/sessions/{key}").json()["session"]
    assert (session["model"], session["agent"]) == ("other", "coder")
    model_server.push(Reply(text="On the other model."), model="other-model")
    api.wait(api.send(key, "next")["run_id"])
    assert model_server.requests[-1].model == "other-model"  # the next turn runs on it

    menu.click()
    with page.expect_download() as got:
        page.get_by_role("link", name="Export Markdown").click()
    text = Path(got.value.path()).read_text(encoding="utf-8")
    assert "Letter to the landlord" in text and "Draft a letter" in text
    with page.expect_download() as got:  # a download leaves the menu open
        page.get_by_role("link", name="Export JSON").click()
    exported = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert [m["text"] for m in exported["messages"] if m["kind"] == "user"] == [
        "Draft a letter", "next"]

    page.get_by_role("button", name="Archive").click()
    expect(page.get_by_role("note")).to_contain_text("Archived.")
    expect(page.locator(f".chat-link[href='/chats/{key}']")).to_have_count(0)
    page.goto(f"{gateway.url}/chats?archived=1")
    page.get_by_role("button", name="Restore").click()
    expect(page.locator(f".chat-link[href='/chats/{key}']")).to_have_count(1)
    assert console_errors == []


def test_a_new_chat_is_made_with_the_agent_and_model_picked(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: SignedIn, console_errors: list[str]) -> None:
    gateway = gateway_factory(SECOND_MODEL.format(url=model_server.openai_base_url))
    page = signed_in(gateway)
    page.get_by_label("Agent").select_option("coder")
    page.get_by_label("Model").select_option("other")
    model_server.push(Reply(text="From the other model."), model="other-model")
    box = page.get_by_role("textbox", name="Message")
    box.fill("hello, coder")
    box.press("Enter")
    expect(page.locator(".item.assistant .markdown")).to_have_text("From the other model.")
    key = page.url.rsplit("/", 1)[1]
    session = gateway.client().http.get(f"/api/sessions/{key}").json()["session"]
    assert (session["agent"], session["model"]) == ("coder", "other")
    asked = [r for r in model_server.requests if r.model == "other-model"]
    assert asked and "You write code." in json.dumps(asked[0].body)  # the agent's prompt
    assert console_errors == []


def test_delete_says_what_goes_then_the_chat_is_a_page_that_says_so(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    kept = _chat(api, model_server, "Keep this one")
    hidden = api.new_chat(memory_mode="incognito")
    model_server.push(Reply(text="ok"))
    api.wait(api.send(hidden, "secret")["run_id"])
    page = signed_in(gateway)
    for key in (kept, hidden):  # an Incognito chat is deleted from its page too
        _open(page, gateway, key)
        page.get_by_label("Chat options", exact=True).first.click()
        page.get_by_role("link", name="Delete…").click()
        expect(page.locator("main")).to_contain_text("takes away, for good")
        expect(page.locator("main")).to_contain_text("messages")
        if key == kept:
            expect(page.locator("main")).to_contain_text("memory items filed under this chat")
            shot(page, "chat-delete-confirm")
        page.get_by_role("button", name="Delete this chat").click()
        expect(page).to_have_url(f"{gateway.url}/")
        expect(page.locator(f".chat-link[href='/chats/{key}']")).to_have_count(0)
        assert api.http.get(f"/api/sessions/{key}").status_code == 404
    page.goto(f"{gateway.url}/chats/{kept}")
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.locator("main")).to_contain_text("Temporary chat that ended")
    expect(page.get_by_role("link", name="All chats", exact=True)).to_be_visible()
    shot(page, "chat-not-found")
    assert all("404" in e for e in console_errors), console_errors


# --------------------------------------------------------------------------- theme and width


def test_the_theme_toggle_is_remembered_and_works_without_scripts(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer) -> None:
    key = _chat(gateway.client(), model_server, "Colours")
    for scripts in (True, False):
        with _page_in(browser, color_scheme="light", java_script_enabled=scripts) as page:
            _sign_in(page, gateway)
            page.goto(f"{gateway.url}/chats/{key}")
            root = page.locator("html")
            background = "getComputedStyle(document.body).backgroundColor"
            light = page.evaluate(background)
            page.get_by_role("button", name="Dark theme").click()
            expect(root).to_have_attribute("data-theme", "dark")
            page.wait_for_timeout(200)
            assert page.evaluate(background) != light
            page.reload()
            expect(root).to_have_attribute("data-theme", "dark")  # the cookie keeps it
            expect(page.get_by_role("button", name="Dark theme")).to_have_attribute(
                "aria-pressed", "true")
            page.get_by_role("button", name="System theme").click()
            expect(root).to_have_attribute("data-theme", "system")


PAGES = ("/", "/chats", "/chats/{key}", "/chats/{key}/delete", "/approvals", "/memory",
         "/usage", "/settings", "/chats/no-such-chat")


def _tour(page: Page, gateway: Gateway, key: str, shot: Shot,
          name: str) -> list[tuple[str, int]]:
    """Visit every page, saving `<name>-<page>` shots; each page's width as drawn."""
    widths = []
    for path in PAGES:
        page.goto(gateway.url + path.format(key=key))
        page.wait_for_timeout(150)
        widths.append((path, int(page.evaluate("document.documentElement.scrollWidth"))))
        shown = path.strip("/").replace("{key}", "chat").replace("/", "-") or "start"
        shot(page, name.replace("{page}", shown))
    return widths


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_page_scrolls_sideways_on_a_phone(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer, shot: Shot,
        scheme: str) -> None:
    key = _chat(gateway.client(), model_server, "A long question " * 12,
                "```\n" + "x" * 300 + "\n```\n\n" + "averyveryverylongword" * 12)
    with _page_in(browser, viewport=PHONE, color_scheme=scheme) as page:
        _sign_in(page, gateway)
        widths = _tour(page, gateway, key, shot, f"phone-{{page}}-{scheme}")
    wide = [(path, width) for path, width in widths if width > PHONE["width"]]
    assert not wide, f"wider than 390 px: {wide}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_at_desktop_width(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer, shot: Shot,
        scheme: str) -> None:
    key = _chat(gateway.client(), model_server, "Write me a function",
                "Here it is:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n- short\n"
                "- tested")
    with _page_in(browser, viewport={"width": 1280, "height": 800}, color_scheme=scheme) as page:
        _sign_in(page, gateway)
        _tour(page, gateway, key, shot, f"desktop-{{page}}-{scheme}")
