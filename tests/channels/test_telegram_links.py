"""Telegram across restarts and moves: a thread keeps its chat, what arrived while the gateway
was down is caught up once, "Continue on" moves a chat's link and tells the owner's DM it
left once, and a channel that fails is reported while the rest keeps working."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Gateway
from tests.support.polling import until
from tests.support.telegram import GUEST, OWNER, chats, health, telegram_config

MOVED = "This chat continues on {} now. Messages here no longer reach it."


def test_a_thread_continues_its_chat_across_a_restart(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="ok")
    gateway = gateway_factory(config=telegram_config(telegram))
    telegram.push_message(OWNER, OWNER, "my name is Ann")
    telegram.wait_sent(1, chat_id=OWNER)
    gateway.stop()
    gateway.start()
    telegram.push_message(OWNER, OWNER, "what is my name?")
    telegram.wait_sent(2, chat_id=OWNER)
    [chat] = chats(gateway.client())
    users = [m["text"] for m in gateway.client().messages(chat["key"]) if m["kind"] == "user"]
    assert users == ["my name is Ann", "what is my name?"]
    last = model_server.requests[-1]
    assert "my name is Ann" in str(last.messages), "the history was not the thread's chat"


def test_what_arrived_while_down_is_caught_up_once_in_order(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="ok")
    gateway = gateway_factory(config=telegram_config(telegram))
    telegram.push_message(OWNER, OWNER, "first")
    telegram.wait_sent(1, chat_id=OWNER)
    gateway.stop()
    later = [telegram.push_message(OWNER, OWNER, f"while down {n}") for n in range(3)]
    gateway.start()
    telegram.wait_sent(4, chat_id=OWNER)
    telegram.wait_confirmed(later[-1])
    [chat] = chats(gateway.client())
    users = [m["text"] for m in gateway.client().messages(chat["key"]) if m["kind"] == "user"]
    assert users == ["first", "while down 0", "while down 1", "while down 2"]
    gateway.stop()
    gateway.start()  # the offset was committed: nothing is taken in twice
    until(lambda: len(telegram.offsets()) >= 4, what="polling again")
    assert len(telegram.sent(OWNER)) == 4


def test_continue_on_moves_the_link_and_the_dm_left_is_told_once(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="answer")
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    telegram.push_message(OWNER, OWNER, "from my phone")
    telegram.wait_sent(1, chat_id=OWNER)
    [phone_chat] = chats(api)
    desk = api.new_chat()
    moved = api.http.put(f"/api/sessions/{desk}/link", json={"channel": "telegram"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["link"] == {"channel": "telegram", "thread": str(OWNER),
                                    "owner_dm": True}
    assert api.http.get(f"/api/sessions/{phone_chat['key']}").json()["link"] is None
    api.wait(api.send(desk, "typed at the desk")["run_id"])
    assert telegram.wait_sent(2, chat_id=OWNER)[1].plain == "answer"  # it answers there now
    telegram.push_message(OWNER, OWNER, "next from the phone")
    telegram.wait_sent(3, chat_id=OWNER)
    users = [m["text"] for m in api.messages(desk) if m["kind"] == "user"]
    assert users == ["typed at the desk", "next from the phone"]
    assert api.http.delete(f"/api/sessions/{desk}/link").status_code == 200
    note = telegram.wait_sent(4, chat_id=OWNER)[3]
    assert note.plain == MOVED.format("the dashboard")
    again = api.http.put(f"/api/sessions/{desk}/link", json={"channel": "telegram"})
    assert again.status_code == 200
    assert api.http.put(f"/api/sessions/{desk}/link",  # continued where it is: nothing said
                        json={"channel": "telegram"}).status_code == 200
    time.sleep(1.0)  # a note would have gone out by now
    assert len(telegram.sent(OWNER)) == 4


def test_a_group_left_behind_hears_nothing(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="hello group")
    group = -2002
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    telegram.push_message(group, OWNER, "@hearth_bot hi", chat_type="group", chat_title="G")
    telegram.wait_sent(1, chat_id=group)
    [chat] = chats(api)
    assert api.http.put(f"/api/sessions/{chat['key']}/link",
                        json={"channel": "telegram"}).status_code == 200
    api.wait(api.send(chat["key"], "now on my DM")["run_id"])
    telegram.wait_sent(1, chat_id=OWNER)
    assert len(telegram.sent(group)) == 1, "the group heard where the chat went"


def test_links_refuse_what_cannot_be_done(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway]) -> None:
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    key = api.new_chat()
    cases = [("nope", {"channel": "slack"}, 422, "unknown_channel"),
             ("temp", {"channel": "telegram"}, 409, "restricted_chat"),
             ("missing", {"channel": "telegram"}, 404, "session_not_found"),
             ("shape", {"channel": 5}, 422, None)]
    temp = api.new_chat(memory_mode="temporary")
    for name, body, status, code in cases:
        target = {"temp": temp, "missing": "chat-nobody"}.get(name, key)
        answer = api.http.put(f"/api/sessions/{target}/link", json=body)
        assert answer.status_code == status, (name, answer.text)
        if code:
            assert answer.json()["error"]["code"] == code, name
    assert telegram.sent() == []


def test_a_wrong_token_is_reported_and_the_gateway_keeps_working(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    bad = "999:WRONG-token-abcdefghijklmnopqrstuvw"
    gateway = gateway_factory(config=telegram_config(telegram, token=bad))
    api = gateway.client()
    state = until(lambda: health(api) if health(api)["state"] == "error" else None,
                  what="the channel in error")
    assert "token was refused" in state["sentence"]
    assert bad not in api.http.get("/healthz").text
    model_server.push(Reply(text="still here"))
    key = api.new_chat()
    assert api.wait(api.send(key, "hello")["run_id"])["status"] == "complete"
    assert bad not in gateway.output()


def test_an_unreachable_server_is_retried_until_it_is_back(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    telegram.stop()
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    state = until(lambda: health(api) if health(api)["state"] == "error" else None,
                  what="the channel in error")
    assert "cannot be reached" in state["sentence"]
    model_server.push(Reply(text="back again"))
    telegram.start()
    telegram.push_message(OWNER, OWNER, "are you there?")
    assert telegram.wait_sent(1, chat_id=OWNER, timeout=20)[0].plain == "back again"
    assert health(api)["state"] == "running"


def test_a_send_the_server_refused_is_retried_and_delivered_once(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="eventually"))
    telegram.fail("sendMessage", 502, times=2)
    telegram.fail("sendMessage", 429, retry_after=1)
    gateway_factory(config=telegram_config(telegram))
    telegram.push_message(OWNER, OWNER, "hello")
    assert telegram.wait_sent(1, chat_id=OWNER, timeout=20)[0].plain == "eventually"
    until(lambda: len(telegram.calls("sendMessage")) >= 4)
    assert len(telegram.sent(OWNER)) == 1


def test_a_blocked_bot_is_said_in_the_chat(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="you will not see this"))
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    telegram.block_chat(GUEST)
    telegram.push_message(GUEST, GUEST, "hi", first_name="Bob")
    [chat] = until(lambda: chats(api), what="the chat made")

    def notice() -> list[str]:
        return [m["text"] for m in api.messages(chat["key"]) if m["kind"] == "notice"]
    [said] = until(notice, what="the failed delivery said")
    assert said.startswith("A message to Telegram could not be delivered")
    assert "blocked" in said
