"""The Settings page's model form in the browser: the endpoint given, its models are listed to
choose the name from (and the id follows the name), a listing that fails says why and leaves
the name to type; every key of a model is given and shown in the models table, a failed Test
is said there, and Edit opens the form filled in. Looked at in light and dark, on a desktop
and a phone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Locator, Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import DESKTOP, Shot, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]
LISTED = ["gpt-4o", "gpt-4o-mini", "o3-mini"]


def _give_endpoint(page: Page, url: str) -> None:
    form = page.locator("[data-model-form]")
    form.get_by_label("Base URL").fill(url)
    form.get_by_label("Base URL").press("Tab")  # its change asks the endpoint


def _form_given_endpoint(page: Page, gateway: Gateway, url: str) -> Locator:
    """The Settings page's model form at desktop width, its base URL given (which lists)."""
    page.set_viewport_size(DESKTOP)
    page.goto(f"{gateway.url}/settings#add-model")
    _give_endpoint(page, url)
    return page.locator("[data-model-form]")


def test_the_model_form_lists_the_endpoints_models_and_takes_every_key(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str], shot: Shot) -> None:
    model_server.listed_models = LISTED
    page = signed_in(gateway)
    form = _form_given_endpoint(page, gateway, model_server.openai_base_url)
    state = form.locator("[data-list-state]")
    expect(state).to_contain_text("3 models offered by this endpoint")
    options = page.locator("#model-names option")
    expect(options).to_have_count(3)
    assert [options.nth(i).get_attribute("value") for i in range(3)] == LISTED
    form.get_by_label("Model name").fill("gpt-4o-mini")
    form.get_by_label("Model name").press("Tab")
    expect(form.get_by_label("Id", exact=True)).to_have_value("gpt-4o-mini")  # follows the name
    form.get_by_label("Vision").check()
    form.get_by_label("Context window (tokens)").fill("128000")
    form.get_by_label("Most output tokens").fill("16384")
    form.get_by_label("Input, US$ per million tokens").fill("0.15")
    form.get_by_label("Output, US$ per million tokens").fill("0.6")
    form.get_by_label("In the chat chain").check()
    form.get_by_role("button", name="Add model").click()
    expect(page.locator(".notice.saved")).to_contain_text("The model is added")
    row = page.locator('tr[data-model="gpt-4o-mini"]')
    expect(row).to_contain_text("128k context · 16.4k out · vision · $0.15 / $0.6 per 1M tokens")
    expect(page.locator('tr[data-model="fake"]')).to_contain_text("from config.toml, read-only")

    model_server.push(Reply(status=500), model="gpt-4o-mini")
    row.get_by_role("button", name="Test gpt-4o-mini").click()
    row = page.locator('tr[data-model="gpt-4o-mini"]')
    expect(row.locator(".model-health")).to_contain_text("failed its Test at")
    expect(page.locator('[data-why="gpt-4o-mini"]')).to_contain_text("HTTP 500")
    shots(page, gateway, shot, "/settings#models", "settings-models-failed-test")

    page.goto(f"{gateway.url}/settings#models")
    page.get_by_role("link", name="Edit gpt-4o-mini").click()
    expect(page.get_by_role("heading", name="Edit gpt-4o-mini")).to_be_visible()
    expect(form.get_by_label("Most output tokens")).to_have_value("16384")
    expect(form.get_by_label("Vision")).to_be_checked()
    expect(form.get_by_label("In the chat chain")).to_be_checked()
    expect(state).to_contain_text("3 models offered")  # listed with the model's own key
    shots(page, gateway, shot, "/settings?model=gpt-4o-mini#add-model", "settings-model-edit")

    def endpoint_given(shown: Page) -> None:
        _give_endpoint(shown, model_server.openai_base_url)
        expect(shown.locator("[data-list-state]")).to_contain_text("offered by this endpoint")

    shots(page, gateway, shot, "/settings#add-model", "settings-model-form", then=endpoint_given)
    assert not console_errors


def test_a_listing_that_fails_says_why_and_the_name_can_be_typed(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str], shot: Shot) -> None:
    model_server.listing_status = 401
    page = signed_in(gateway)
    form = _form_given_endpoint(page, gateway, model_server.openai_base_url)
    state = form.locator("[data-list-state]")
    expect(state).to_contain_text("The models could not be listed")
    expect(state).to_contain_text("HTTP 401")
    expect(state).to_contain_text("Type the model's name instead")
    expect(page.locator("#model-names option")).to_have_count(0)
    model_server.listing_status = 200
    form.get_by_role("button", name="List models").click()  # asked again, by hand
    expect(state).to_contain_text("1 model offered by this endpoint")
    model_server.listing_status = 401
    form.get_by_role("button", name="List models").click()
    expect(state).to_contain_text("HTTP 401")

    def refused(shown: Page) -> None:
        _give_endpoint(shown, model_server.openai_base_url)
        expect(shown.locator("[data-list-state]")).to_contain_text("could not be listed")

    shots(page, gateway, shot, "/settings#add-model", "settings-model-unlisted", then=refused)
    form = page.locator("[data-model-form]")
    form.get_by_label("Model name").fill("typed-by-hand")
    form.get_by_role("button", name="Add model").click()
    expect(page.locator('tr[data-model="typed-by-hand"]')).to_be_visible()
    # the 502s the listing was answered are the browser's own lines; nothing else went wrong
    assert not [e for e in console_errors if "status of 502" not in e]
