"""Slack end to end: the real Slack adapter (slack_sdk's WebClient, its SignatureVerifier)
against the fake Slack over loopback, in a real gateway answering from the scripted model.
Events arrive signed at /channels/slack/events as Slack delivers them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.fakes.slack_server import SECRET, TOKEN, FakeSlack, dm, mention
from tests.gateway import Gateway
from tests.support.polling import until
from tests.support.telegram import chats, running

OWNER, GUEST = "UOWNER1", "UGUEST2"


def slack_config(fake: FakeSlack, extra: str = "") -> str:
    return (f'[channels.slack]\nbot_token = "{TOKEN}"\nsigning_secret = "{SECRET}"\n'
            f'owner_ids = ["{OWNER}"]\napi_url = "{fake.api_url}"\n{extra}')


def _events(gateway: Gateway) -> str:
    running(gateway.client(), "slack")  # taking events in
    return f"{gateway.url}/channels/slack/events"


def test_the_events_url_is_verified_and_a_dm_is_answered_in_place_of_its_placeholder(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Hello **Ann**."))
    gateway = gateway_factory(config=slack_config(slack))
    challenge = slack.post(_events(gateway), b'{"type":"url_verification","challenge":"c-1"}',
                           "application/json")
    assert challenge.status_code == 200 and challenge.json() == {"challenge": "c-1"}
    taken = slack.deliver(_events(gateway), dm(OWNER, "hi bot"))
    assert taken.status_code == 200 and taken.json() == {"ok": True, "taken": "admitted"}
    slack.wait_for(lambda: any(p.now == "Hello **Ann**." for p in slack.in_channel(f"D{OWNER}")))
    [answer] = slack.in_channel(f"D{OWNER}")  # one message: the placeholder became the answer
    assert answer.text == "…" and answer.thread_ts is None
    [chat] = chats(gateway.client())
    said = gateway.client().messages(chat["key"])
    assert said[0]["source"] == {"channel": "slack", "thread": f"D{OWNER}", "user": OWNER}


def test_a_mention_is_answered_in_its_thread_and_a_retry_is_admitted_once(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="On it.")
    gateway = gateway_factory(config=slack_config(slack))
    event = mention(GUEST, "C42", "what is the plan?")
    first = slack.deliver(_events(gateway), event, event_id="Ev-same")
    again = slack.deliver(_events(gateway), event, event_id="Ev-same", retry=1)
    assert first.json()["taken"] == "admitted"
    assert again.status_code == 200 and again.json()["taken"] == "again"
    slack.wait_for(lambda: any(p.now == "On it." for p in slack.in_channel("C42")))
    time.sleep(0.5)
    posts = slack.in_channel("C42")
    assert len(posts) == 1 and posts[0].thread_ts == event["ts"]  # in the mention's thread
    [request] = model_server.requests
    said = [m for m in request.messages if m["role"] == "user"]
    assert said[-1]["content"].endswith("\nwhat is the plan?")  # the <@bot> mention gone
    assert said[-1]["content"].startswith("[A message from")  # a guest's line, fenced


def test_a_bad_or_stale_signature_is_401_and_takes_nothing_in(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config=slack_config(slack))
    forged = slack.deliver(_events(gateway), dm(OWNER, "forged"), signature="v0=" + "0" * 64)
    stale = slack.deliver(_events(gateway), dm(OWNER, "old"), at=time.time() - 600)
    assert (forged.status_code, stale.status_code) == (401, 401)
    assert forged.json()["error"]["code"] == "bad_signature"
    edit = dm(OWNER, "changed")
    edit["subtype"] = "message_changed"
    assert slack.deliver(_events(gateway), edit).json()["taken"] == "ignored"
    bot = dm(OWNER, "from a bot")
    bot["bot_id"] = "B1"
    assert slack.deliver(_events(gateway), bot).json()["taken"] == "ignored"
    bad = slack.post(_events(gateway), b"not json", "application/json")
    assert bad.status_code == 400
    time.sleep(0.5)
    assert not chats(gateway.client()) and not model_server.requests


def test_an_approval_has_buttons_only_the_owners_press_answers(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "s.txt", "content": "s"})]),
                      Reply(text="Wrote it."))
    gateway = gateway_factory(config=slack_config(slack))
    slack.deliver(_events(gateway), dm(OWNER, "write s.txt"))
    slack.wait_for(lambda: any(p.blocks for p in slack.in_channel(f"D{OWNER}")))
    question = next(p for p in slack.in_channel(f"D{OWNER}") if p.blocks)
    buttons = question.blocks[1]["elements"]  # type: ignore[index]
    values = {b["text"]["text"]: b["value"] for b in buttons}
    assert set(values) == {"Allow once", "Always", "Deny"}
    actions = f"{gateway.url}/channels/slack/actions"
    guest = slack.press(actions, GUEST, values["Allow once"], f"D{OWNER}", question.ts)
    assert "only the owner" in guest.json()["text"].lower()
    assert not (gateway.home / "workspace" / "s.txt").exists()
    owner = slack.press(actions, OWNER, values["Allow once"], f"D{OWNER}", question.ts)
    assert owner.json()["text"] == "Allowed once."
    until(lambda: (gateway.home / "workspace" / "s.txt").exists(), what="the file written")
    slack.wait_for(lambda: any(p.now == "Wrote it." for p in slack.in_channel(f"D{OWNER}")))
    assert question.blocks == []  # the buttons went once the owner answered


def test_a_rate_limited_answer_waits_its_retry_after_and_lands_once(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    release = threading.Event()
    model_server.push(Reply(text="After the wait.", hold=release))
    slack.fail("chat.update", 429, "ratelimited", retry_after=2, text="After the wait.")
    gateway = gateway_factory(config=slack_config(slack))
    slack.deliver(_events(gateway), dm(OWNER, "hello"))
    slack.wait_for(lambda: bool(slack.in_channel(f"D{OWNER}")))  # the "…" placeholder
    release.set()
    slack.wait_for(lambda: any(p.now == "After the wait." for p in slack.in_channel(f"D{OWNER}")))
    [limited] = slack.limited
    later = [c for c in slack.calls if c.at > limited.at]
    assert [(c.method, c.text) for c in later] == [("chat.update", "After the wait.")]
    assert later[0].at - limited.at >= 2.0  # retried once, no sooner than Retry-After
    time.sleep(0.5)
    [answer] = slack.in_channel(f"D{OWNER}")  # one message: no "…" left beside the answer
    assert answer.now == "After the wait."
    assert gateway.client().http.get("/api/desk").json()["deliveries"] == []  # none failed


def test_after_a_429_no_call_reaches_slack_before_its_retry_after(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    release = threading.Event()
    model_server.push(Reply(text="Waited.", hold=release))
    slack.fail("chat.postMessage", 429, "ratelimited", retry_after=2, text="…")
    gateway = gateway_factory(config=slack_config(slack))
    slack.deliver(_events(gateway), dm(OWNER, "hello"))
    slack.wait_for(lambda: bool(slack.limited))  # the placeholder was refused: wait 2 s
    release.set()  # the answer is ready at once
    slack.wait_for(lambda: any(p.now == "Waited." for p in slack.in_channel(f"D{OWNER}")))
    [limited] = slack.limited
    later = [c for c in slack.calls if c.at > limited.at]
    assert later and all(c.at - limited.at >= 2.0 for c in later), later
    time.sleep(0.5)
    assert [p.now for p in slack.in_channel(f"D{OWNER}")] == ["Waited."]


def test_a_429_whose_retry_after_is_no_number_is_waited_a_second_and_sent_once(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Still sent."))
    slack.fail("chat.postMessage", 429, "ratelimited", text="Still sent.",
               retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    slack.fail("chat.update", 429, "ratelimited", text="Still sent.",
               retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    gateway = gateway_factory(config=slack_config(slack))
    slack.deliver(_events(gateway), dm(OWNER, "hello"))
    slack.wait_for(lambda: any(p.now == "Still sent." for p in slack.in_channel(f"D{OWNER}")))
    [limited] = slack.limited  # the answer's post or its placeholder's update, as it went
    retry = next(c for c in slack.calls if c.at > limited.at)
    assert retry.text == "Still sent." and retry.at - limited.at >= 1.0
    time.sleep(0.5)
    assert [p.now for p in slack.in_channel(f"D{OWNER}")] == ["Still sent."]


def test_continue_on_slack_then_the_owners_reply_in_the_dm_continues_the_chat(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="answer")
    gateway = gateway_factory(config=slack_config(slack))
    api = gateway.client()
    assert running(api, "slack")["can_continue"] is True
    desk = api.new_chat()
    moved = api.http.put(f"/api/sessions/{desk}/link", json={"channel": "slack"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["link"] == {"channel": "slack", "thread": f"D{OWNER}",
                                    "owner_dm": True}  # the DM's own id, as Slack sends it
    api.wait(api.send(desk, "typed at the desk")["run_id"])
    slack.wait_for(lambda: any(p.now == "answer" for p in slack.in_channel(f"D{OWNER}")))
    taken = slack.deliver(_events(gateway), dm(OWNER, "next from the phone"))
    assert taken.json()["taken"] == "admitted"
    slack.wait_for(lambda: sum(p.now == "answer" for p in slack.in_channel(f"D{OWNER}")) == 2)
    assert [c["key"] for c in chats(api)] == [desk]  # the reply continued it; none was started
    users = [m["text"] for m in api.messages(desk) if m["kind"] == "user"]
    assert users == ["typed at the desk", "next from the phone"]


def test_a_dm_slack_would_not_open_is_learned_from_the_owners_first_message(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="hi")
    slack.fail("conversations.open", 200, "missing_scope")
    gateway = gateway_factory(config=slack_config(slack))
    api = gateway.client()
    said = running(api, "slack")
    assert said["can_continue"] is False and "could not be opened" in said["sentence"]
    html = api.http.get("/settings").text
    assert "Write to the bot in a direct message first" in html  # not "set owner_ids"
    slack.deliver(_events(gateway), dm(OWNER, "hello"))
    slack.wait_for(lambda: any(p.now == "hi" for p in slack.in_channel(f"D{OWNER}")))
    desk = api.new_chat()
    moved = api.http.put(f"/api/sessions/{desk}/link", json={"channel": "slack"})
    assert moved.status_code == 200 and moved.json()["link"]["thread"] == f"D{OWNER}"


def test_a_guests_call_is_asked_in_the_owners_dm_and_a_yes_there_approves_it(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "g.txt", "content": "g"})]),
                      Reply(text="Written for Bob."))
    gateway = gateway_factory(config=slack_config(slack))
    slack.deliver(_events(gateway), mention(GUEST, "C42", "write g.txt"))
    slack.wait_for(lambda: any(p.blocks for p in slack.in_channel(f"D{OWNER}")))
    question = next(p for p in slack.in_channel(f"D{OWNER}") if p.blocks)
    assert question.text.startswith("Approval needed for") and "write_file" in question.text
    assert not any(p.blocks for p in slack.in_channel("C42"))  # nothing the guest can press
    assert not (gateway.home / "workspace" / "g.txt").exists()
    taken = slack.deliver(_events(gateway), dm(OWNER, "yes"))
    assert taken.json()["taken"] == "answered"
    until(lambda: (gateway.home / "workspace" / "g.txt").exists(), what="the file written")
    slack.wait_for(lambda: any(p.now == "Written for Bob." for p in slack.in_channel("C42")))
    api = gateway.client()
    said = [m["text"] for chat in chats(api) for m in api.messages(chat["key"])
            if m["kind"] == "user"]
    assert "yes" not in said  # the owner's "yes" answered; it was no message of any chat


def test_a_flood_across_threads_is_answered_once_each_in_order(
        slack: FakeSlack, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="ok")
    gateway = gateway_factory(config=slack_config(slack))
    threads = [mention(GUEST, "C7", f"thread {t}") for t in range(3)]
    url = _events(gateway)
    for n in range(4):
        for t, root in enumerate(threads):
            event = mention(GUEST, "C7", f"thread {t} message {n}", thread_ts=root["ts"])
            assert slack.deliver(url, event).json()["taken"] == "admitted"
    slack.wait_for(lambda: sum(p.now == "ok" for p in slack.in_channel("C7")) >= 12,
                   timeout=60)
    time.sleep(1.5)
    posts = slack.in_channel("C7")
    assert sum(p.now == "ok" for p in posts) == 12
    api = gateway.client()
    assert len(chats(api)) == 3  # one chat per Slack thread
    for chat in chats(api):
        users = [m["text"] for m in api.messages(chat["key"]) if m["kind"] == "user"]
        t = users[0].split()[1]
        assert users == [f"thread {t} message {n}" for n in range(4)]
