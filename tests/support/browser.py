"""What the browser tests (tests/browser, Playwright) share: signing in, a chat's page opened
with its stream live, the two viewport sizes, the theme a page is drawn in, that a page does
not scroll sideways on a phone, and `shots`, a page saved in light and dark on a desktop and a
phone. Imported only by modules that skip when Playwright is
not installed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from tests.gateway import TOKEN, Gateway

Shot = Callable[[Page, str], Path]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def sign_in(page: Page, gateway: Gateway) -> Page:
    """Sign `page` in with the token; it is left on the front page (a new chat), its composer
    ready (before its script runs, Enter starts a new line instead of sending)."""
    page.goto(f"{gateway.url}/login")
    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{gateway.url}/")
    expect(page.get_by_role("heading", name="New chat")).to_be_visible()
    expect(page.locator("#text[data-ready]")).to_have_count(1)
    return page


@contextmanager
def signed_in_context(browser: Browser, gateway: Gateway, **options: Any) -> Iterator[Page]:
    """A signed-in page in a fresh browser context made with `options` (closed after)."""
    from tests.browser.conftest import TIMEOUT_MS

    context = browser.new_context(**options)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield sign_in(context.new_page(), gateway)
    finally:
        context.close()


def open_chat(page: Page, gateway: Gateway, key: str) -> None:
    """The chat's page, its stream open, marked so that a reload would show
    (`same_document`)."""
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads


def same_document(page: Page) -> bool:
    """The page was never loaded again since `open_chat`."""
    return bool(page.evaluate("window.__sameDocument === true"))


def set_theme(page: Page, gateway: Gateway, theme: str) -> None:
    """Draw the gateway's pages in `theme` ("light" or "dark") from the next load on."""
    page.context.add_cookies([{"name": "hearth_theme", "value": theme, "url": gateway.url}])


def no_sideways_scroll(page: Page) -> None:
    """The page is no wider than a phone's screen."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide at {PHONE['width']} px"


def shots(page: Page, gateway: Gateway, shot: Shot, path: str, name: str, *,
          then: Callable[[Page], None] | None = None, element: str | None = None) -> None:
    """`name`-light, -dark, -phone-light and -phone-dark of `path`; none scrolls sideways
    on the phone. Each is a new load of the page, so it reads the theme and the size anew: a
    #fragment of `path` is scrolled to after the load, not gone to (going to the same address
    with one would not load the page again). `then` runs after each load (a menu opened,
    say); `element`, a selector, saves that part of the page alone."""
    address, _, fragment = path.partition("#")
    for theme in ("light", "dark"):
        set_theme(page, gateway, theme)
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            page.goto(f"{gateway.url}{address}")
            if fragment:  # a place a page shows in sections (Settings) is opened by its hash
                page.evaluate("(place) => { window.location.hash = place; }", fragment)
                page.locator(f"#{fragment}").scroll_into_view_if_needed()
            if then is not None:
                then(page)
            if size is PHONE:
                no_sideways_scroll(page)
            saved = shot(page, f"{name}{suffix}-{theme}")
            if element is not None:
                page.locator(element).screenshot(path=str(saved))
    set_theme(page, gateway, "light")
    page.set_viewport_size(DESKTOP)
