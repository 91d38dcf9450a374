"""What the dashboard's pages show of the channels (web/pages/channels_view.py), against a real
gateway whose Telegram channel talks to the fake Bot API over loopback: the chat menu's
"Continue on Telegram" and the top bar's badge as the link says, none for a restricted chat,
a channel message's "via" line (a guest's name escaped), and Settings → Channels. The script
that calls the API from the menu is driven in tests/browser/test_channels_ui.py."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from markupsafe import escape

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Api, Gateway
from tests.support.dashboard import Page, badge_of, main_of, shown_buttons
from tests.support.telegram import (
    MOVED_AWAY,
    OWNER,
    channel_in_state,
    chat_of_thread,
    running,
    telegram_config,
)


@pytest.fixture
def linked_gateway(gateway_factory: Callable[..., Gateway],
                   telegram: FakeTelegram) -> tuple[Gateway, Api, Page]:
    gateway = gateway_factory(telegram_config(telegram, poll_seconds=1))
    api = gateway.client()
    running(api)
    return gateway, api, Page(gateway)


def test_the_menu_continues_a_chat_on_telegram_and_the_badge_says_where_it_answers(
        linked_gateway: tuple[Gateway, Api, Page], telegram: FakeTelegram,
        model_server: ScriptedModelServer) -> None:
    _, api, page = linked_gateway
    key = api.new_chat()
    before = page.html(key)
    assert badge_of(before) == ""
    assert shown_buttons(before) == ["Continue on Telegram"]

    moved = page.http.put(f"/api/sessions/{key}/link", json={"channel": "telegram"},
                          headers={"X-CSRF-Token": page.csrf})
    assert moved.status_code == 200, moved.text
    assert moved.json()["link"] == {"channel": "telegram", "thread": str(OWNER),
                                    "owner_dm": True}
    after = page.html(key)
    assert badge_of(after) == "Answers on Telegram · your DM"
    assert shown_buttons(after) == ["Answer here only"]  # not the channel it is already on

    model_server.push(Reply(text="An answer for both"))
    api.wait(api.send(key, "hello")["run_id"])
    [answer] = telegram.wait_sent(1, chat_id=OWNER)  # the move itself said nothing there
    assert answer.plain == "An answer for both"

    here = page.http.delete(f"/api/sessions/{key}/link", headers={"X-CSRF-Token": page.csrf})
    assert here.status_code == 200 and here.json() == {"link": None}
    assert badge_of(page.html(key)) == ""
    assert shown_buttons(page.html(key)) == ["Continue on Telegram"]
    assert telegram.wait_sent(2, chat_id=OWNER)[-1].plain == MOVED_AWAY


def test_a_restricted_chat_offers_no_continue_and_the_api_refuses_to_link_it(
        linked_gateway: tuple[Gateway, Api, Page]) -> None:
    _, api, page = linked_gateway
    for mode in ("incognito", "temporary"):
        key = api.new_chat(memory_mode=mode)
        shown = page.html(key)
        assert "data-continue" not in shown and "Continue on" not in shown
        assert badge_of(shown) == ""
        refused = page.http.put(f"/api/sessions/{key}/link", json={"channel": "telegram"},
                                headers={"X-CSRF-Token": page.csrf})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "restricted_chat"


def test_a_channel_without_the_owners_chat_offers_no_continue_and_settings_say_why(
        gateway_factory: Callable[..., Gateway], telegram: FakeTelegram) -> None:
    gateway = gateway_factory(telegram_config(telegram, owners=(), poll_seconds=1))
    api = gateway.client()
    assert running(api)["can_continue"] is False
    page = Page(gateway)
    key = api.new_chat()
    assert "Continue on" not in page.html(key)
    settings = main_of(page.http.get("/settings").text)
    assert "Chats cannot be continued on Telegram until it knows your own chat" in settings


def test_channel_messages_say_via_and_a_guests_name_is_escaped(
        linked_gateway: tuple[Gateway, Api, Page], telegram: FakeTelegram,
        model_server: ScriptedModelServer) -> None:
    _, api, page = linked_gateway
    model_server.default = Reply(text="ok")
    telegram.push_message(chat_id=OWNER, from_id=OWNER, text="from my phone")
    owners = chat_of_thread(api, str(OWNER))
    shown = page.html(owners)
    assert '<p class="via">via Telegram</p>' in shown
    assert badge_of(shown) == "Answers on Telegram · your DM"  # a DM's chat answers there

    hostile = '<img src=x onerror="alert(1)">'
    telegram.push_message(chat_id=222, from_id=222, text="hi, I am a guest", first_name=hostile)
    guests = chat_of_thread(api, "222")
    shown = page.html(guests)
    assert hostile not in shown
    assert f"<strong>{escape(hostile)}</strong> via Telegram" in shown
    assert badge_of(shown) == "Answers on Telegram"  # someone else's chat: not "your DM"


def test_settings_show_each_channels_state_and_sentence(
        gateway_factory: Callable[..., Gateway], telegram: FakeTelegram) -> None:
    telegram.fail("getMe", 401, times=1000)  # a refused token: the channel says so
    gateway = gateway_factory(telegram_config(telegram, poll_seconds=1))
    api = gateway.client()
    health = channel_in_state(api, "error")
    settings = main_of(Page(gateway).http.get("/settings").text)
    row = re.search(r'<li class="channel-row" data-channel="telegram" data-state="error">'
                    r"(.*?)</li>", settings, re.S)
    assert row is not None, settings
    assert '<span class="pill channel-state error">error</span>' in row.group(1)
    said = health["sentence"].split(" (next try")[0]  # the pause grows meanwhile
    assert str(escape(said)) in row.group(1) and said.strip()
    assert "No channel is set up" not in settings


def test_settings_say_how_to_add_a_channel_when_none_is_set_up(gateway: Gateway) -> None:
    settings = main_of(Page(gateway).http.get("/settings").text)
    assert 'id="no-channels"' in settings and "<code>[channels.telegram]</code>" in settings
    assert "channel-row" not in settings
    key = gateway.client().new_chat()
    chat = Page(gateway).html(key)
    assert "link-menu" not in chat and badge_of(chat) == ""
