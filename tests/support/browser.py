"""What the browser tests (tests/browser, Playwright) share: the two viewport sizes, the theme a
page is drawn in, that a page does not scroll sideways on a phone, and `shots`, a page saved in
light and dark on a desktop and a phone. Imported only by modules that skip when Playwright is
not installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page

from tests.gateway import Gateway

Shot = Callable[[Page, str], Path]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def set_theme(page: Page, gateway: Gateway, theme: str) -> None:
    """Draw the gateway's pages in `theme` ("light" or "dark") from the next load on."""
    page.context.add_cookies([{"name": "hearth_theme", "value": theme, "url": gateway.url}])


def no_sideways_scroll(page: Page) -> None:
    """The page is no wider than a phone's screen."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide at {PHONE['width']} px"


def shots(page: Page, gateway: Gateway, shot: Shot, path: str, name: str) -> None:
    """`name`-light, -dark, -phone-light and -phone-dark of `path`; none scrolls sideways
    on the phone. (`path` has no #fragment: going to the same address with one would not
    load the page again, so it would keep the theme and the size it had.)"""
    for theme in ("light", "dark"):
        set_theme(page, gateway, theme)
        page.set_viewport_size(DESKTOP)
        page.goto(f"{gateway.url}{path}")
        shot(page, f"{name}-{theme}")
        page.set_viewport_size(PHONE)
        page.goto(f"{gateway.url}{path}")
        no_sideways_scroll(page)
        shot(page, f"{name}-phone-{theme}")
    set_theme(page, gateway, "light")
    page.set_viewport_size(DESKTOP)
