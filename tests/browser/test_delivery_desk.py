"""The Not delivered page (the delivery desk) in Chromium: three replies Telegram refused and a
title no model gave are listed (the sidebar counting the three replies, not the chore tried
once); Mark delivered, Drop and Retry each settle one (the retried one reaching Telegram once),
Retry now has the chore loop give the title; then the page says all is delivered. Saved to
test-artifacts/screenshots/ in light and dark, on a desktop and on a phone, full and empty."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.gateway import Api, Gateway  # noqa: E402
from tests.support.browser import DESKTOP, Shot, shots  # noqa: E402
from tests.support.fixtures import telegram_fixture  # noqa: E402, F401 - `telegram`
from tests.support.polling import until  # noqa: E402
from tests.support.telegram import OWNER, chats, telegram_config  # noqa: E402

SignedIn = Callable[[Gateway], Page]
ASKED = ("Which trains go to Lisbon?", "And the ferries?", "Any night buses?")


def desk_of(api: Api) -> dict[str, Any]:
    return dict(api.http.get("/api/desk").json())


def three_refused(gateway: Gateway, telegram: FakeTelegram) -> list[int]:
    """Three replies to the owner, each refused by Telegram; their ids, oldest first."""
    api = gateway.client()
    for count, words in enumerate(ASKED, start=1):
        telegram.push_message(OWNER, OWNER, words)
        until(lambda n=count: len(desk_of(api)["deliveries"]) == n,  # type: ignore[misc]
              what=f"refused reply {count} listed")
    return sorted(d["id"] for d in desk_of(api)["deliveries"])


def test_the_desk_settles_what_telegram_refused_and_a_title_owed(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer, signed_in: SignedIn, console_errors: list[str],
        shot: Shot) -> None:
    model_server.chore_replies["title"] = Reply(text="")  # no model gives a title: owed
    model_server.default = Reply(text="The 08:05 from Porto, every morning.")
    telegram.fail("sendMessage", 403, "Forbidden: bot was blocked by the user", times=3)
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    marked, dropped, retried = three_refused(gateway, telegram)
    [chore] = until(lambda: desk_of(api)["chores"], what="the title owed")
    assert chore["kind"] == "title" and chore["attempts"] == 1

    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{gateway.url}/desk")
    nav = page.get_by_role("link", name=re.compile("^Not delivered"))
    expect(nav).to_have_attribute("aria-current", "page")
    expect(nav.locator(".count")).to_have_text("3")  # the chore tried once is not counted
    item = page.locator(f"#delivery-{retried}")
    expect(item.locator(".desk-state")).to_have_text("Failed")
    expect(item).to_contain_text("Telegram")
    expect(item).to_contain_text("bot may be blocked")
    expect(item.locator(".desk-preview")).to_have_text("The 08:05 from Porto, every morning.")
    expect(item.get_by_role("link", name=ASKED[0])).to_be_visible()  # the untitled chat
    expect(page.locator(f"#chore-{chore['id']}")).to_contain_text("Title")
    shots(page, gateway, shot, "/desk", "desk")

    page.goto(f"{gateway.url}/desk")
    page.get_by_role("button", name=f"Mark delivered delivery {marked}").click()
    expect(page.get_by_role("status")).to_contain_text("Marked delivered.")
    expect(page.locator(f"#delivery-{marked}")).to_have_count(0)
    page.get_by_role("button", name=f"Drop delivery {dropped}").click()
    expect(page.get_by_role("status")).to_contain_text("Dropped. It will not be sent.")
    expect(page.locator(".page-nav .count")).to_have_text("1")
    page.get_by_role("button", name=f"Retry delivery {retried}", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Sending it again.")
    [sent] = telegram.wait_sent(1, chat_id=OWNER)
    assert sent.plain == "The 08:05 from Porto, every morning."

    model_server.chore_replies["title"] = Reply(text="Trains to Lisbon")
    page.get_by_role("button", name=f"Retry now chore {chore['id']}").click()
    expect(page.get_by_role("status")).to_contain_text("Due now")
    until(lambda: desk_of(api)["chores"] == [], what="the owed title given")
    assert [c["title"] for c in chats(api)] == ["Trains to Lisbon"]
    page.goto(f"{gateway.url}/desk")
    expect(page.get_by_text("Everything was delivered")).to_be_visible()
    expect(page.get_by_text("No chores owed")).to_be_visible()
    expect(page.locator(".page-nav .count")).to_have_count(0)
    time.sleep(0.3)  # a second send of the retried reply, if one were coming, has gone by now
    assert len(telegram.sent(OWNER)) == 1
    shots(page, gateway, shot, "/desk", "desk-empty")
    assert console_errors == []
