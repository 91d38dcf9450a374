"""The spending limits in the browser: set on the Settings page's Spending section (saved, and
shown again as set), then shown on the Usage page with what was spent against each; looked at
in light and dark, on a desktop and a phone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import DESKTOP, Shot, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]


def test_limits_are_set_in_settings_and_shown_on_the_usage_page(
        gateway: Gateway, signed_in: SignedIn, console_errors: list[str], shot: Shot) -> None:
    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{gateway.url}/settings#spending")
    section = page.locator("#spending")
    expect(section.locator("#unpriced-models")).to_contain_text("fake has no price")
    section.get_by_label("Everything: per day").fill("2")
    section.get_by_label("Everything: per month").fill("30")
    section.get_by_label("Each job: per day").fill("0.25")
    section.get_by_role("button", name="Save the limits").click()
    expect(page.locator(".notice.saved")).to_contain_text("The spending limits are saved")
    expect(section.get_by_label("Everything: per month")).to_have_value("30")
    expect(section.locator("#limit-standing")).to_contain_text("$0.00 of $2.00")
    shots(page, gateway, shot, "/settings#spending", "settings-spending")
    page.goto(f"{gateway.url}/usage")
    limits = page.locator("#limit-standing")
    expect(limits).to_contain_text("Everything · today")
    expect(limits).to_contain_text("$0.00 of $30.00")
    shots(page, gateway, shot, "/usage", "usage-limits")
    assert not console_errors
