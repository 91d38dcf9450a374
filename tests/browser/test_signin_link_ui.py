"""A one-time sign-in link in a real browser, on a phone's screen: opening it lands on the
dashboard signed in (a reload stays in); opening it again, in another browser, is the sign-in
page saying the link was used, with the token's form beside it, in light and dark, on a
desktop and a phone."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Browser, Page, expect  # noqa: E402

from hearth.engine.access.signin_links import LINK_SECONDS  # noqa: E402
from hearth.engine.compose import make_signin_link  # noqa: E402
from hearth.home import Home  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import DESKTOP, PHONE, Shot, no_sideways_scroll  # noqa: E402


def link_made(gateway: Gateway, at: float | None = None) -> str:
    """A link's code as `hearth token --link` makes it, made at `at`: on a thread of its own,
    since this one runs Playwright's event loop (the store's blocking writes refuse it)."""
    with ThreadPoolExecutor(1) as apart:
        return apart.submit(make_signin_link, Home(gateway.home), at).result()


def fresh_page(browser: Browser, scheme: str, size: dict[str, int]) -> Page:
    context = browser.new_context(color_scheme=scheme, viewport=size)  # type: ignore[arg-type]
    context.set_default_timeout(10_000)
    return context.new_page()


def test_a_link_opened_on_a_phone_signs_it_in_and_lands_on_the_dashboard(
        gateway: Gateway, browser: Browser, shot: Shot) -> None:
    code = link_made(gateway)
    phone = fresh_page(browser, "light", PHONE)
    try:
        phone.goto(f"{gateway.url}/signin/link/{code}")
        expect(phone).to_have_url(f"{gateway.url}/")
        expect(phone.get_by_role("heading", name="New chat")).to_be_visible()
        phone.reload()
        expect(phone.get_by_role("heading", name="New chat")).to_be_visible()  # still in
        shot(phone, "signin-link-landed-phone-light")
    finally:
        phone.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_used_or_expired_link_is_the_sign_in_page_saying_so(
        gateway: Gateway, browser: Browser, shot: Shot, scheme: str) -> None:
    used = link_made(gateway)
    expired = link_made(gateway, at=time.time() - LINK_SECONDS - 1)
    first = fresh_page(browser, scheme, PHONE)
    try:
        first.goto(f"{gateway.url}/signin/link/{used}")
        expect(first).to_have_url(f"{gateway.url}/")
    finally:
        first.context.close()
    for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
        page = fresh_page(browser, scheme, size)
        try:
            page.goto(f"{gateway.url}/signin/link/{used}")
            alert = page.get_by_role("alert")
            expect(alert).to_contain_text("This sign-in link was used already")
            expect(alert.locator("code")).to_have_text("hearth token --link")
            expect(page.get_by_label("Token")).to_be_visible()  # the normal sign-in
            if size is PHONE:
                no_sideways_scroll(page)
            shot(page, f"signin-link-used{suffix}-{scheme}")
            page.goto(f"{gateway.url}/signin/link/{expired}")
            expect(page.get_by_role("alert")).to_contain_text("This sign-in link has expired")
            shot(page, f"signin-link-expired{suffix}-{scheme}")
            page.goto(f"{gateway.url}/")
            expect(page).to_have_url(f"{gateway.url}/login")  # neither signed it in
        finally:
            page.context.close()
