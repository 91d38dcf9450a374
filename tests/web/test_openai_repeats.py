"""`/v1/chat/completions` sent again under the same `Idempotency-Key` (a client's retry): one
admission, one run, whose answer every copy of the request is given; the key is its
sender's own, and the same key with another message is refused. Before, each copy was a new
message and a new turn. (A retry after the gateway serving it died: tests/engine/test_replicas.)
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.store import db_rows

server, gateway, api = module_gateway("openai-repeats")


@pytest.fixture
def client(gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key=TOKEN, timeout=30) as made:
        yield made


def keyed(key: str, chat: str | None = None) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} | ({"X-Hearth-Session": chat} if chat else {})
    return {"extra_headers": headers}


def turns_asked(server: ScriptedModelServer, text: str) -> int:
    """How many model calls a turn made for the message `text` (a title's call is not one)."""
    return sum(1 for call in server.requests
               if call.messages and call.messages[-1].get("content") == text)


def temporary_chats(gateway: Gateway) -> int:
    return int(db_rows(gateway, "SELECT count(*) FROM sessions WHERE origin = 'openai' AND "
                                "memory_mode = 'temporary'")[0][0])


def test_a_named_request_sent_again_is_answered_by_its_first_run(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    key, said = str(uuid.uuid4()), "the kestrel-abacus, once"
    server.push(Reply(text="Answered once."))
    first = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[{"role": "user", "content": said}], **keyed(key, "repeats"))
    again = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[{"role": "user", "content": said}], **keyed(key, "repeats"))
    streamed = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[{"role": "user", "content": said}], stream=True,
        **keyed(key, "repeats"))
    assert [r.headers["x-hearth-run"] for r in (again, streamed)] == [
        first.headers["x-hearth-run"]] * 2
    assert again.parse().choices[0].message.content == "Answered once."
    text = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
    assert text == "Answered once."
    assert turns_asked(server, said) == 1
    chat = first.headers["x-hearth-session"]
    assert [m["text"] for m in api.messages(chat) if m["kind"] == "user"] == [said]


def test_the_same_key_with_another_message_is_refused_and_admits_nothing(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    key = str(uuid.uuid4())
    server.push(Reply(text="First."))
    made = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[{"role": "user", "content": "one thing"}],
        **keyed(key, "reused"))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": "another thing"}],
            **keyed(key, "reused"))
    assert caught.value.code == "idempotency_key_reused", caught.value.body
    assert "new request takes a new key" in caught.value.message
    chat = made.headers["x-hearth-session"]
    assert [m["text"] for m in api.messages(chat) if m["kind"] == "user"] == ["one thing"]
    for bad in ("", "x" * 256, "two words"):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="hearth", messages=[{"role": "user", "content": "never admitted"}],
                **keyed(bad, "reused"))
        assert refused.value.code == "invalid_idempotency_key", bad
    assert turns_asked(server, "never admitted") == 0


def test_a_stateless_repeat_while_its_turn_runs_follows_it_and_both_are_answered(
        client: openai.OpenAI, server: ScriptedModelServer, gateway: Gateway) -> None:
    key, said = str(uuid.uuid4()), "the lemur-sextant, asked while it runs"
    hold = threading.Event()
    server.push(Reply(text="One turn's answer.", chunks=3, hold=hold))
    answers: dict[str, Any] = {}

    def ask(name: str, stream: bool) -> None:
        raw = client.chat.completions.with_raw_response.create(
            model="hearth", messages=[{"role": "user", "content": said}], stream=stream,
            **keyed(key))
        parsed = raw.parse()
        text = ("".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
                if stream else parsed.choices[0].message.content)
        answers[name] = (raw.headers["x-hearth-run"], text)

    before = len(server.requests)
    first = threading.Thread(target=ask, args=("first", False))
    first.start()
    assert server.wait_for_requests(before + 1)
    second = threading.Thread(target=ask, args=("second", True))
    second.start()
    second.join(1.5)  # it waits on the running turn rather than running its own
    assert second.is_alive() and turns_asked(server, said) == 1
    hold.set()
    first.join(30)
    second.join(30)
    assert answers["first"] == answers["second"], answers
    assert answers["first"][1] == "One turn's answer."
    assert turns_asked(server, said) == 1
    assert temporary_chats(gateway) == 0  # the last of the two to end forgot its chat


def test_the_key_is_its_senders_own(client: openai.OpenAI, server: ScriptedModelServer,
                                    gateway: Gateway, api: Api) -> None:
    """An app sending the owner's key (or the owner an app's) sends its own message."""
    made = api.http.post("/api/apps", json={"name": "keyed", "permissions": ["send_messages"]})
    assert made.status_code == 201, made.text
    key, said = str(uuid.uuid4()), "the same words under the same key"
    hold = threading.Event()
    server.responder = lambda request: Reply(text="Each its own.", hold=hold)
    threads, before = [], len(server.requests)
    for token in (TOKEN, made.json()["token"]):
        sender = openai.OpenAI(base_url=gateway.url + "/v1", api_key=token, timeout=30)
        threads.append(threading.Thread(target=lambda s=sender: s.chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": said}], **keyed(key))))
        threads[-1].start()
    try:
        assert server.wait_for_requests(before + 2)
    finally:
        hold.set()
        for thread in threads:
            thread.join(30)
        server.responder = None
    assert turns_asked(server, said) == 2
