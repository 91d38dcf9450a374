"""The dashboard in a real browser (Chromium through Playwright): signing in, the chat list's
new-chat buttons, hostile text rendered inert, the composer's keys, and reaching it all by
keyboard. Each page visited is saved to test-artifacts/screenshots/."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hearth.web.http import signin
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Gateway

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
from playwright.sync_api import Locator, Page, expect  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]

HOSTILE_REPLY = (
    "Here you go: <script>window.__pwned=1</script> "
    '<img src=x onerror="window.__pwned=2"> '
    "[click](javascript:window.__pwned=3) "
    '<div onmouseover="window.__pwned=4" onclick="window.__pwned=5">hover me</div> '
    '<svg onload="window.__pwned=6"></svg>'
)
HOSTILE_USER = '<script>window.__pwned=7</script><img src=x onerror="window.__pwned=8">'
HOSTILE_TITLE = '<img src=x onerror="window.__pwned=9"><script>window.__pwned=10</script>'

# Every attribute named on* on any element, every inline or foreign script, every javascript:
# link: what the page would carry if a piece of text got through unescaped.
FIND_LIVE_CODE = """() => {
  const handlers = [];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      if (attr.name.toLowerCase().startsWith("on")) handlers.push(el.tagName + " " + attr.name);
    }
  }
  return {
    pwned: typeof window.__pwned,
    handlers,
    scripts: [...document.scripts].map((s) => s.src || "inline: " + s.textContent),
    jsLinks: [...document.querySelectorAll("a[href]")]
      .map((a) => a.getAttribute("href"))
      .filter((href) => /^\\s*javascript:/i.test(href)),
  };
}"""


def chat_key(page: Page, gateway: Gateway) -> str:
    match = re.fullmatch(re.escape(gateway.url) + r"/chats/([^/?#]+)", page.url)
    assert match, page.url
    return match.group(1)


def focused(locator: Locator) -> bool:
    return bool(locator.evaluate("(el) => el === document.activeElement"))


def tab_until(page: Page, target: Locator, limit: int = 30) -> int:
    """Press Tab until `target` has focus; how many presses it took."""
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if focused(target):
            return presses
    raise AssertionError(f"{target} was not reached with {limit} presses of Tab")


def start_chat(page: Page, gateway: Gateway, text: str, mode: str = "Chat") -> str:
    """Make a chat from the front page, as the owner does: pick the kind, write, press Enter;
    the key of the chat it opens."""
    page.goto(f"{gateway.url}/")
    page.get_by_role("radio", name=mode, exact=True).check()
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")
    expect(page).to_have_url(re.compile(re.escape(gateway.url) + "/chats/"))
    return chat_key(page, gateway)


def user_texts(gateway: Gateway, key: str) -> list[str]:
    return [m["text"] for m in gateway.client().messages(key) if m["kind"] == "user"]


def assert_inert(page: Page, gateway: Gateway) -> None:
    found = page.evaluate(FIND_LIVE_CODE)
    assert found["pwned"] == "undefined", found
    assert found["handlers"] == [], found
    assert found["jsLinks"] == [], found
    assert all(src.startswith(f"{gateway.url}/static/") for src in found["scripts"]), found


# --------------------------------------------------------------------------- sign-in


def test_signing_in_in_a_browser(gateway: Gateway, page: Page, shot: Shot,
                                 console_errors: list[str]) -> None:
    page.goto(f"{gateway.url}/")
    expect(page).to_have_url(f"{gateway.url}/login")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    shot(page, "login")

    page.get_by_label("Token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not this gateway's token")
    assert page.context.cookies() == []
    shot(page, "login-wrong-token")
    # The refusal is a 401 page, which Chromium logs; that one is expected, nothing else.
    assert all("status of 401" in e and e.endswith(f"{gateway.url}/login]")
               for e in console_errors), console_errors
    console_errors.clear()

    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{gateway.url}/")
    expect(page.get_by_role("heading", name="New chat")).to_be_visible()
    shot(page, "start-page")

    page.reload()
    expect(page).to_have_url(f"{gateway.url}/")
    expect(page.get_by_role("heading", name="New chat")).to_be_visible()

    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies[signin.COOKIE]["httpOnly"] is True
    assert cookies[signin.COOKIE]["sameSite"] == "Strict"
    assert signin.COOKIE not in page.evaluate("document.cookie")
    assert console_errors == []


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize("mode", ["Incognito", "Temporary"])
def test_a_new_incognito_or_temporary_chat_is_not_listed(
        gateway: Gateway, page: Page, signed_in: SignedIn, shot: Shot,
        console_errors: list[str], mode: str) -> None:
    signed_in(gateway)
    kept = start_chat(page, gateway, "a kept one")
    expect(page.get_by_role("note")).to_have_count(0)  # a kept chat has no mode line

    hidden = start_chat(page, gateway, "a hidden one", mode=mode)
    assert hidden != kept
    expect(page.get_by_role("note")).to_contain_text(f"{mode} chat")
    shot(page, f"{mode.lower()}-chat-page")

    page.goto(f"{gateway.url}/chats")
    links = page.locator("main a[href^='/chats/']")
    expect(links).to_have_count(1)
    expect(links).to_have_attribute("href", f"/chats/{kept}")
    page.goto(f"{gateway.url}/chats?q=hidden")
    expect(page.locator(f"main a[href='/chats/{hidden}']")).to_have_count(0)
    apart = page.locator(".chat-links.restricted a")  # the sidebar keeps it apart, to end it
    expect(apart).to_have_count(1)
    expect(apart).to_have_attribute("href", f"/chats/{hidden}")
    expect(page.locator(f".chat-links:not(.restricted) a[href='/chats/{hidden}']")
           ).to_have_count(0)
    assert console_errors == []


# --------------------------------------------------------------------------- hostile text


def test_hostile_text_is_inert_in_the_browser(
        gateway: Gateway, model_server: ScriptedModelServer, page: Page, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    model_server.push(Reply(text=HOSTILE_REPLY))
    api = gateway.client()
    key = api.new_chat()
    renamed = api.http.patch(f"/api/sessions/{key}", json={"title": HOSTILE_TITLE})
    assert renamed.status_code == 200, renamed.text
    run = api.send(key, HOSTILE_USER)["run_id"]
    assert api.wait(run)["status"] == "complete"

    signed_in(gateway)
    expect(page.get_by_role("link", name=HOSTILE_TITLE)).to_be_visible()  # shown as text
    assert_inert(page, gateway)

    page.goto(f"{gateway.url}/chats/{key}")
    transcript = page.locator(".transcript")
    expect(transcript).to_have_count(1)
    expect(page.get_by_role("heading", level=1)).to_have_text(HOSTILE_TITLE)
    expect(transcript).to_contain_text(HOSTILE_USER)  # the user's text, as text
    expect(transcript).to_contain_text("<script>window.__pwned=1</script>")
    expect(transcript).to_contain_text("[click](javascript:window.__pwned=3)")
    expect(transcript).to_contain_text("hover me")
    expect(transcript.locator("script")).to_have_count(0)
    expect(page.locator("[onerror]")).to_have_count(0)
    expect(page.locator("a[href^='javascript:' i]")).to_have_count(0)
    for hover in page.get_by_text("hover me").all():  # a handler, were there one, would run
        hover.hover()
        hover.click()
    assert_inert(page, gateway)
    shot(page, "hostile-chat-page")

    # A query is echoed on the list ("No chat matches …"): inert there too.
    page.goto(f"{gateway.url}/chats?q=" + "%3Cscript%3Ewindow.__pwned%3D11%3C%2Fscript%3E")
    expect(page.locator("main")).to_contain_text("<script>window.__pwned=11</script>")
    assert_inert(page, gateway)
    assert console_errors == []


# --------------------------------------------------------------------------- composer


def test_enter_sends_the_message_once(gateway: Gateway, page: Page, signed_in: SignedIn,
                                      shot: Shot, console_errors: list[str]) -> None:
    signed_in(gateway)
    key = start_chat(page, gateway, "the first words")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)  # its scripts run
    assert user_texts(gateway, key) == ["the first words"]  # made with it, once

    box = page.get_by_role("textbox", name="Message")
    box.click()
    box.type("hello from the browser")
    box.press("Enter")

    main = page.locator("#transcript")  # the heading may say it too: an untitled chat
    expect(main.get_by_text("hello from the browser", exact=True)).to_have_count(1)
    expect(box).to_have_value("")
    page.reload()
    expect(main.get_by_text("hello from the browser", exact=True)).to_have_count(1)
    assert user_texts(gateway, key) == ["the first words", "hello from the browser"]
    shot(page, "chat-page")
    assert console_errors == []


def test_shift_enter_starts_a_new_line_and_does_not_send(
        gateway: Gateway, page: Page, signed_in: SignedIn, console_errors: list[str]) -> None:
    signed_in(gateway)
    url = page.url
    box = page.get_by_role("textbox", name="Message")
    box.click()
    box.type("first line")
    box.press("Shift+Enter")
    box.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    time.sleep(0.5)  # what a wrongly sent form would need to arrive
    assert page.url == url
    assert gateway.client().http.get("/api/sessions").json()["sessions"] == []  # no chat yet

    box.press("Enter")  # and Enter then sends both lines as one message, making the chat
    expect(page).to_have_url(re.compile(re.escape(gateway.url) + "/chats/"))
    assert user_texts(gateway, chat_key(page, gateway)) == ["first line\nsecond line"]
    assert console_errors == []


# --------------------------------------------------------------------------- keyboard


def test_sign_in_and_new_chats_by_keyboard(gateway: Gateway, page: Page, shot: Shot,
                                           console_errors: list[str]) -> None:
    page.goto(f"{gateway.url}/login")
    token = page.get_by_label("Token")
    button = page.get_by_role("button", name="Sign in")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    tab_until(page, token)
    page.keyboard.type(TOKEN)
    tab_until(page, button, limit=1)  # the very next stop
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{gateway.url}/")

    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()  # the front page is ready to type into
    page.keyboard.type("typed by keyboard")
    incognito = page.get_by_role("radio", name="Incognito")
    tab_until(page, page.get_by_role("radio", name="Chat"))
    page.keyboard.press("ArrowRight")  # a radio group moves by arrows
    expect(incognito).to_be_checked()
    shot(page, "start-page-keyboard-focus")
    page.keyboard.press("Enter")  # Enter in a form's field sends it
    expect(page.get_by_role("note")).to_contain_text("Incognito chat")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)  # its scripts have run

    page.keyboard.press("Control+Shift+O")  # New chat, from anywhere
    expect(page).to_have_url(f"{gateway.url}/")
    assert console_errors == []
