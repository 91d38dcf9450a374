"""Telegram when its polling fails while sending works, and a guest's approval: an answer owed
to a thread goes out while `getUpdates` keeps failing (sending never waits on the poller); the
poller's pause grows on the failing call itself, whatever `getMe` answers; a guest's call is
asked of the owner in the owner's own thread (never in the guest's, where only the guest could
press), and answered there by a reply word; an addressed group message keeps its line breaks.
The real adapter against the fake Bot API over loopback, in a real gateway."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Gateway
from tests.support.polling import until
from tests.support.telegram import GUEST, OWNER, chats, telegram_config


def test_an_answer_owed_while_polling_fails_goes_out_at_once(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="First."), Reply(text="Sent while polling is down."))
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    telegram.push_message(OWNER, OWNER, "hello")
    telegram.wait_sent(1, chat_id=OWNER)
    telegram.fail("getUpdates", 502, times=10_000)  # polling held down from now on
    before = len(telegram.calls("getUpdates"))
    until(lambda: len(telegram.calls("getUpdates")) > before + 1, what="polling failing")
    [chat] = chats(api)
    sent = api.http.post(f"/api/sessions/{chat['key']}/messages", json={"text": "from the web"})
    assert sent.status_code == 202
    replies = telegram.wait_sent(2, chat_id=OWNER, timeout=15)
    assert replies[1].plain == "Sent while polling is down."
    assert all(call.status == 502 for call in telegram.calls("getUpdates")[before:])


def test_the_pollers_pause_grows_while_get_updates_fails_and_get_me_answers(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway]) -> None:
    telegram.fail("getUpdates", 502, times=10_000)
    gateway_factory(config=telegram_config(telegram))
    until(lambda: len(telegram.calls("getUpdates")) >= 4, timeout=30,
          what="four failed polls")
    times = [call.time for call in telegram.calls("getUpdates")]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert len(telegram.calls("getMe")) >= 4  # each try connects again, and getMe answers
    assert gaps[1] > gaps[0] * 1.5 and gaps[2] > gaps[1] * 1.5, gaps  # 1 s, 2 s, 4 s …


def test_a_guests_call_is_asked_in_the_owners_own_thread_and_answered_there(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Hi Bob."),
                      Reply(tool_calls=[Call("write_file", {"path": "g.txt", "content": "g"})]),
                      Reply(text="Written for Bob."))
    gateway = gateway_factory(config=telegram_config(telegram))
    telegram.push_message(GUEST, GUEST, "hello", first_name="Bob")
    telegram.wait_sent(1, chat_id=GUEST)
    telegram.push_message(GUEST, GUEST, "write g.txt", first_name="Bob")
    [question] = telegram.wait_sent(1, chat_id=OWNER)
    assert question.plain.startswith(f"Approval needed for guest {GUEST} on telegram")
    assert "write_file" in question.plain and question.reply_markup is not None
    assert len(telegram.sent(GUEST)) == 1  # nothing asked where only the guest can press
    telegram.push_message(OWNER, OWNER, "yes")
    until(lambda: (gateway.home / "workspace" / "g.txt").exists(), what="the file written")
    assert telegram.wait_sent(2, chat_id=GUEST)[1].plain == "Written for Bob."
    api = gateway.client()
    said = [m["text"] for chat in chats(api) for m in api.messages(chat["key"])
            if m["kind"] == "user"]
    assert "yes" not in said  # the owner's "yes" answered; it was no message of any chat


def test_an_addressed_group_message_keeps_its_line_breaks(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Listed.")
    group = -1002
    gateway_factory(config=telegram_config(telegram))
    telegram.push_message(group, OWNER, "@hearth_bot shopping:\n- milk\n-  eggs  ",
                          chat_type="group", chat_title="Home")
    telegram.wait_sent(1, chat_id=group)
    said = [m for m in model_server.requests[0].messages if m["role"] == "user"]
    assert said[-1]["content"].endswith("shopping:\n- milk\n- eggs")
