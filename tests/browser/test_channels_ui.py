"""Channels on the dashboard, in Chromium, with a real Telegram channel talking to the fake Bot
API: the chat menu's "Continue on Telegram" moves a chat quietly and the top bar's badge says
where it answers, without a reload; "Answer here only" takes the badge away and tells the
owner's Telegram chat once; a refusal's sentence is shown in the menu; a restricted chat's
menu offers no move; channel messages say who sent them and from where, live, a guest's name
as text; Settings → Channels shows each channel's state. Screenshots on a desktop and a
390 px phone, light and dark, into test-artifacts/."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Locator, Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import (  # noqa: E402
    PHONE,
    Shot,
    no_sideways_scroll,
    open_chat,
    set_theme,
    shots,
)
from tests.support.fixtures import telegram_fixture  # noqa: E402, F401 - `telegram`
from tests.support.telegram import (  # noqa: E402
    MOVED_AWAY,
    OWNER,
    channel_in_state,
    chat_of_thread,
    running,
    telegram_config,
)

SignedIn = Callable[[Gateway], Page]
GROUP = -1001  # a Telegram group where the owner and a guest both talk to the bot
QUIET = 0.6  # seconds to wait to see that nothing was sent


@pytest.fixture
def channel_gateway(gateway_factory: Callable[..., Gateway], telegram: FakeTelegram,
                    model_server: ScriptedModelServer) -> Gateway:
    model_server.default = Reply(text="Noted.")
    gateway = gateway_factory(telegram_config(telegram, poll_seconds=1))
    running(gateway.client())
    return gateway



def _menu(page: Page) -> Locator:
    """The chat's menu, opened."""
    menu = page.locator("details.chat-menu")
    if menu.get_attribute("open") is None:
        menu.locator("summary").click()
    return menu.locator(".menu-panel")



def test_continue_on_telegram_shows_the_badge_and_answer_here_only_takes_it_away(
        channel_gateway: Gateway, telegram: FakeTelegram, signed_in: SignedIn, shot: Shot,
        console_errors: list[str]) -> None:
    api = channel_gateway.client()
    key = api.new_chat()
    assert api.http.patch(f"/api/sessions/{key}", json={"title": "Trip plans"}).is_success
    page = signed_in(channel_gateway)
    open_chat(page, channel_gateway, key)
    badge = page.locator("#link-badge")
    expect(badge).to_be_hidden()
    menu = _menu(page)
    expect(menu.get_by_role("button", name="Answer here only")).to_be_hidden()

    menu.get_by_role("button", name="Continue on Telegram").click()
    expect(badge).to_be_visible()
    expect(badge).to_have_text("Answers on Telegram · your DM")
    expect(menu.locator("[data-link-status]")).to_have_text(
        "This chat continues on Telegram; it answers here too.")
    expect(menu.get_by_role("button", name="Continue on Telegram")).to_be_hidden()
    expect(menu.get_by_role("button", name="Answer here only")).to_be_visible()
    assert page.evaluate("window.__sameDocument === true")  # no reload
    assert api.http.get(f"/api/sessions/{key}").json()["link"]["channel"] == "telegram"
    time.sleep(QUIET)
    assert telegram.sent(chat_id=OWNER) == []  # a move from the dashboard says nothing there
    shot(page, "channels-continued-menu")

    menu.get_by_role("button", name="Answer here only").click()
    expect(badge).to_be_hidden()
    expect(menu.locator("[data-link-status]")).to_have_text("This chat answers here only now.")
    expect(menu.get_by_role("button", name="Continue on Telegram")).to_be_visible()
    assert api.http.get(f"/api/sessions/{key}").json()["link"] is None
    [note] = telegram.wait_sent(1, chat_id=OWNER)  # the owner's chat it left hears it once
    assert note.plain == MOVED_AWAY
    assert page.evaluate("window.__sameDocument === true")
    assert console_errors == []


def test_a_refusal_is_said_in_the_menu_and_nothing_changes(
        channel_gateway: Gateway, signed_in: SignedIn, console_errors: list[str]) -> None:
    api = channel_gateway.client()
    key = api.new_chat()
    page = signed_in(channel_gateway)
    open_chat(page, channel_gateway, key)
    menu = _menu(page)
    assert api.http.delete(f"/api/sessions/{key}").status_code in (200, 204)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    menu.get_by_role("button", name="Continue on Telegram").click()
    status = menu.locator("[data-link-status]")
    expect(status).to_contain_text(f"There is no chat named '{key}'")
    expect(status).to_have_class("hint link-status error")
    expect(page.locator("#link-badge")).to_be_hidden()
    expect(menu.get_by_role("button", name="Continue on Telegram")).to_be_enabled()
    assert dialogs == []  # said in the page, never with alert()
    assert all("404" in error for error in console_errors)  # the browser logs the 404 only


def test_a_restricted_chats_menu_offers_no_continue(
        channel_gateway: Gateway, signed_in: SignedIn) -> None:
    api = channel_gateway.client()
    page = signed_in(channel_gateway)
    for mode in ("incognito", "temporary"):
        key = api.new_chat(memory_mode=mode)
        open_chat(page, channel_gateway, key)
        menu = _menu(page)
        expect(menu.get_by_role("link", name="Delete…")).to_be_visible()  # the menu is open
        expect(menu.get_by_text("Continue on")).to_have_count(0)
        expect(menu.get_by_role("button", name="Answer here only")).to_have_count(0)
        expect(page.locator("#link-badge")).to_be_hidden()


def test_channel_messages_say_who_sent_them_live_and_the_badge_where_it_answers(
        channel_gateway: Gateway, telegram: FakeTelegram, signed_in: SignedIn, shot: Shot,
        console_errors: list[str]) -> None:
    api = channel_gateway.client()
    telegram.push_message(chat_id=GROUP, from_id=OWNER, text="@hearth_bot plan the picnic",
                          chat_type="group", chat_title="Family", first_name="Owner")
    key = chat_of_thread(api, str(GROUP))
    assert api.http.patch(f"/api/sessions/{key}", json={"title": "Family picnic"}).is_success
    page = signed_in(channel_gateway)
    open_chat(page, channel_gateway, key)
    expect(page.locator("#link-badge")).to_have_text("Answers on Telegram")  # not the owner's DM
    mine = page.locator(".item.user").first
    expect(mine.locator(".via")).to_have_text("via Telegram")

    hostile = '<img src=x onerror="window.__pwned=1">Bob'
    telegram.push_message(chat_id=GROUP, from_id=222, text="@hearth_bot bring lemonade?",
                          chat_type="group", chat_title="Family", first_name=hostile)
    guest = page.locator(".item.user", has_text="bring lemonade?")
    expect(guest.locator(".via.guest")).to_have_text(f"Said by {hostile} via Telegram")
    expect(guest.locator(".via.guest strong")).to_have_text(hostile)  # its name, as text
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("window.__sameDocument === true")  # drawn live
    expect(page.locator(".item.assistant")).to_have_count(2)
    assert console_errors == []

    path = f"/chats/{key}"
    shots(page, channel_gateway, shot, path, "channels-chat")
    shots(page, channel_gateway, shot, path, "channels-chat-menu",
           then=lambda opened: expect(_menu(opened).get_by_role(
               "button", name="Answer here only")).to_be_visible())
    page.set_viewport_size(PHONE)
    page.goto(f"{channel_gateway.url}{path}")
    box = page.locator("#link-badge").bounding_box()
    title = page.locator(".page-title").bounding_box()
    assert box is not None and title is not None
    assert box["x"] + box["width"] <= PHONE["width"] and title["width"] > 60  # the title shows


def test_settings_show_each_channels_state(
        channel_gateway: Gateway, signed_in: SignedIn, shot: Shot) -> None:
    page = signed_in(channel_gateway)
    page.goto(f"{channel_gateway.url}/settings#channels")
    row = page.locator("#channels .channel-row")
    expect(row).to_have_count(1)
    expect(row.locator(".channel-name")).to_have_text("Telegram")
    expect(row.locator(".channel-state")).to_have_text("running")
    expect(row.locator(".channel-sentence")).to_have_text("Connected as @hearth_bot.")
    shots(page, channel_gateway, shot, "/settings#channels", "channels-settings",
          element="#channels")


def test_settings_say_how_to_add_a_channel(
        gateway: Gateway, signed_in: SignedIn, shot: Shot) -> None:
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/settings#channels")
    expect(page.locator("#no-channels")).to_contain_text("[channels.telegram]")
    page.set_viewport_size(PHONE)
    no_sideways_scroll(page)
    page.locator("#channels").screenshot(
        path=str(shot(page, "channels-settings-none-phone")))
    key = gateway.client().new_chat()
    page.goto(f"{gateway.url}/chats/{key}")
    _menu(page)
    expect(page.get_by_text("Continue on")).to_have_count(0)


def test_settings_show_a_channels_error_in_its_sentence(
        gateway_factory: Callable[..., Gateway], telegram: FakeTelegram, signed_in: SignedIn,
        shot: Shot) -> None:
    telegram.fail("getMe", 401, times=1000)  # the token is refused, every time it is tried
    gateway = gateway_factory(telegram_config(telegram, poll_seconds=1))
    api = gateway.client()
    health = channel_in_state(api, "error")
    page = signed_in(gateway)
    set_theme(page, gateway, "dark")
    page.set_viewport_size(PHONE)
    page.goto(f"{gateway.url}/settings#channels")
    row = page.locator("#channels .channel-row")
    expect(row.locator(".channel-state")).to_have_text("error")
    said = health["sentence"].split(" (next try")[0]  # the pause grows while the page loads
    expect(row.locator(".channel-sentence")).to_contain_text(said)
    no_sideways_scroll(page)
    page.locator("#channels").screenshot(
        path=str(shot(page, "channels-settings-error-phone-dark")))
