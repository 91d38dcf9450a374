"""The OpenAI-compatible API (`/v1/chat/completions`, `/v1/models`), driven by the official
`openai` client against a real gateway whose model is the scripted server: both modes (a named
chat, whose history Hearth keeps; a stateless request, whose messages are the whole context and
of which nothing is kept), streamed and not, `usage`, approvals (a named chat's request waits
for the owner; a stateless one's call is refused), and errors in OpenAI's own shape."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from PIL import Image

from hearth.web.api import openai as openai_api
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.approvals import pending_in
from tests.support.store import db_rows

CONFIG = """
[agents.coder]
system_prompt = "You are the coder agent."

[limits]
breaker_failures = 100
"""
server, gateway, api = module_gateway("openai-api", CONFIG)
API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"  # the docs' HTTP API


@pytest.fixture
def client(gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key=TOKEN, timeout=30) as made:
        yield made


def named(name: str) -> dict[str, Any]:
    return {"extra_headers": {"X-Hearth-Session": name}}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def db_bytes(gateway: Gateway) -> bytes:
    files = [gateway.home / "hearth.db", gateway.home / "hearth.db-wal"]
    return b"".join(path.read_bytes() for path in files if path.exists())


def listed(api: Api) -> list[str]:
    answer = api.http.get("/api/sessions", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return [chat["key"] for chat in answer.json()["sessions"]]


def in_thread(work: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run `work()` in a thread; its result (or error) lands in the dict."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except Exception as error:  # noqa: BLE001 - handed to the test to assert on
            out["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# ------------------------------------------------------------------------------- models

def test_the_models_are_hearth_each_agent_and_each_model(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["hearth", "coder", "fake"]
    assert {(m.object, m.owned_by) for m in models.data} == {("model", "hearth")}
    assert all(isinstance(m.created, int) for m in models.data)


def test_each_listed_model_is_retrieved_and_no_other(client: openai.OpenAI,
                                                     api: Api) -> None:
    """`client.models.retrieve(id)` (LangChain and LiteLLM check a model so before using it)
    answers each model the list gives as the list gives it; any other name, one with a `/`
    in it too (encoded by the SDK, or not), is 404 `model_not_found` in OpenAI's shape.
    Before, every retrieve was 404 with the dashboard's envelope."""
    for listed_model in client.models.list().data:
        assert client.models.retrieve(listed_model.id) == listed_model
    for absent in ("gpt-4o", "openai/gpt-4o", "default"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(absent)
        assert caught.value.code == "model_not_found", caught.value.body
        assert "GET /v1/models lists them" in caught.value.message
    raw = api.http.get("/v1/models/openai/gpt-4o")
    assert raw.status_code == 404 and raw.json()["error"]["code"] == "model_not_found"


def test_an_agent_named_as_the_model_answers_with_its_prompt(
        client: openai.OpenAI, server: ScriptedModelServer) -> None:
    server.push(Reply(text="Coded."))
    answer = client.chat.completions.create(model="coder", messages=[user("hi coder")])
    assert answer.choices[0].message.content == "Coded."
    assert answer.model == "coder"
    assert server.requests[-1].system.startswith("You are the coder agent.")


# ---------------------------------------------------------------------------- stateless

def test_a_stateless_request_reads_its_messages_and_leaves_nothing_but_figures(
        client: openai.OpenAI, server: ScriptedModelServer, gateway: Gateway,
        api: Api) -> None:
    calls_before = db_rows(gateway, "SELECT count(*) FROM model_calls WHERE purpose = 'turn'")
    chats_before = listed(api)
    server.push(Reply(text="Plover nine answered", usage=(12, 3)))
    raw = client.chat.completions.with_raw_response.create(model="hearth", messages=[
        {"role": "system", "content": "Answer as a marmot-sentinel."},
        user("First words of the quokka-ledger"),
        {"role": "assistant", "content": "An earlier answer of the heron-abacus"},
        {"role": "user", "content": [{"type": "text", "text": "The last ask of the"},
                                     {"type": "text", "text": "walrus-compass"}]},
    ])
    answer = raw.parse()
    assert answer.choices[0].message.content == "Plover nine answered"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.object == "chat.completion" and answer.model == "hearth"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens,
            answer.usage.total_tokens) == (12, 3, 15)
    sent = [(m["role"], m["content"]) for m in server.requests[-1].messages[1:]]
    assert sent == [("user", "Answer as a marmot-sentinel."),
                    ("user", "First words of the quokka-ledger"),
                    ("assistant", "An earlier answer of the heron-abacus"),
                    ("user", "The last ask of the\nwalrus-compass")]
    run_id = raw.headers["x-hearth-run"]
    assert "x-hearth-session" not in raw.headers
    assert answer.id == "chatcmpl-" + run_id.removeprefix("run_")
    # nothing is kept: no chat (listed or not), message, run or approval; only the call's figures
    assert listed(api) == chats_before
    assert db_rows(gateway, "SELECT count(*) FROM sessions WHERE origin = 'openai' "
                            "AND memory_mode = 'temporary'") == [(0,)]
    assert db_rows(gateway, "SELECT count(*) FROM transcript_events "
                            "WHERE content LIKE '%quokka-ledger%'") == [(0,)]
    assert db_rows(gateway, "SELECT count(*) FROM runs WHERE run_id = ?", run_id) == [(0,)]
    calls_after = db_rows(gateway, "SELECT count(*) FROM model_calls WHERE purpose = 'turn'")
    assert calls_after[0][0] == calls_before[0][0] + 1
    assert db_rows(gateway, "SELECT session_key, tokens_in, tokens_out FROM model_calls "
                            "WHERE purpose = 'turn' ORDER BY id DESC LIMIT 1") == [(None, 12, 3)]
    on_disk = db_bytes(gateway)
    for words in (b"marmot-sentinel", b"quokka-ledger", b"heron-abacus", b"walrus-compass",
                  b"Plover nine"):
        assert words not in on_disk


def test_a_stateless_stream_sends_chunks_usage_and_done(
        client: openai.OpenAI, server: ScriptedModelServer, gateway: Gateway) -> None:
    server.push(Reply(text="one two three four", chunks=4, usage=(7, 5)))
    stream = client.chat.completions.create(
        model="fake", messages=[user("count the ibis-lantern")], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (7, 12)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    assert b"ibis-lantern" not in db_bytes(gateway)


def test_a_stateless_call_that_needs_approval_is_refused_and_never_runs(
        client: openai.OpenAI, server: ScriptedModelServer, gateway: Gateway) -> None:
    write = Call("write_file", {"path": "stateless-out.txt", "content": "never"})
    server.push(Reply(tool_calls=[write]), Reply(text="I could not write it."))
    raw = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[user("write the file please")])
    answer = raw.parse()
    assert answer.choices[0].message.content == "I could not write it."
    result = [m for m in server.requests[-1].messages if m["role"] == "tool"]
    assert len(result) == 1
    assert "needs the owner's approval" in result[0]["content"]
    assert "was not run" in result[0]["content"]
    run_id = raw.headers["x-hearth-run"]
    refused = db_rows(gateway, "SELECT action, actor FROM audit WHERE run_id = ?", run_id)
    assert refused == [("tool.refused", "unattended")]  # never asked, never allowed
    assert list(gateway.home.rglob("stateless-out.txt")) == []


def test_a_stateless_request_may_not_send_a_clients_tool_results(
        client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="hearth", messages=[
            user("hi"),
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            user("and?")])
    assert raised.value.body["param"] == "messages.1"  # type: ignore[index]


# -------------------------------------------------------------------------------- named

def test_a_named_chat_keeps_the_history_and_reads_only_the_new_message(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    server.push(Reply(text="Paris."), Reply(text="About two million."))
    first = client.chat.completions.with_raw_response.create(
        model="hearth", messages=[user("Capital of France?")], **named("work"))
    assert first.parse().choices[0].message.content == "Paris."
    assert first.headers["x-hearth-session"] == "work"
    second = client.chat.completions.create(model="hearth", messages=[
        {"role": "system", "content": "ignored: the chat's agent has its own prompt"},
        user("Capital of France?"), {"role": "assistant", "content": "Paris."},
        user("How many live there?")], **named("work"))
    assert second.choices[0].message.content == "About two million."
    assert second.usage is not None and second.usage.total_tokens > 0
    sent = [(m["role"], m["content"]) for m in server.requests[-1].messages[1:]]
    assert sent == [("user", "Capital of France?"), ("assistant", "Paris."),
                    ("user", "How many live there?")]
    assert "ignored" not in server.requests[-1].system
    assert "work" in listed(api)
    kept = [(m["kind"], m["text"]) for m in api.messages("work")
            if m["kind"] in ("user", "assistant")]
    assert kept == [("user", "Capital of France?"), ("assistant", "Paris."),
                    ("user", "How many live there?"), ("assistant", "About two million.")]
    run = api.wait(first.headers["x-hearth-run"])
    assert run["status"] == "complete"


def test_the_user_field_names_the_chat_and_a_stream_continues_it(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    server.push(Reply(text="Noted: tea."), Reply(text="You said tea.", chunks=3))
    client.chat.completions.create(model="fake", messages=[user("I like tea.")],
                                   user="prefs-1")
    stream = client.chat.completions.create(
        model="fake", messages=[user("What do I like?")], user="prefs-1", stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "You said tea."
    sent = [m["content"] for m in server.requests[-1].messages[1:]]
    assert sent == ["I like tea.", "Noted: tea.", "What do I like?"]
    chat = api.http.get("/api/sessions/prefs-1").json()
    assert chat["session"]["model"] == "fake"  # a model id named: the chat's pick from now on


def test_a_turn_with_tools_streams_each_steps_text_as_it_reads_when_not_streamed(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    api.new_chat(name="steps", trust="trusted")
    write = Call("write_file", {"path": "steps.txt", "content": "x"})
    server.push(Reply(text="Writing it.", tool_calls=[write]), Reply(text="Done."))
    stream = client.chat.completions.create(
        model="hearth", messages=[user("write steps")], stream=True, **named("steps"))
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed == "Writing it.\n\nDone."
    server.push(Reply(text="Again.", tool_calls=[write]), Reply(text="Done again."))
    answer = client.chat.completions.create(
        model="hearth", messages=[user("write steps again")], **named("steps"))
    assert answer.choices[0].message.content == "Again.\n\nDone again."


def test_a_named_chats_call_waits_on_the_owner_then_answers(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api,
        gateway: Gateway) -> None:
    write = Call("write_file", {"path": "approved-out.txt", "content": "yes"})
    server.push(Reply(tool_calls=[write]), Reply(text="Written."))
    thread, out = in_thread(lambda: client.chat.completions.with_raw_response.create(
        model="hearth", messages=[user("write the approved file")], **named("approve-me")))
    approval = pending_in(api, "approve-me")
    time.sleep(0.3)
    assert thread.is_alive() and out == {}  # the request waits on the owner
    decided = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    assert decided.status_code == 200, decided.text
    thread.join(20)
    assert "error" not in out, out
    raw = out["result"]
    assert raw.parse().choices[0].message.content == "Written."
    assert (gateway.home / "workspace" / "approved-out.txt").read_text() == "yes"
    run = api.wait(raw.headers["x-hearth-run"])
    assert [(c["tool"], c["status"]) for c in run["tool_calls"]] == [("write_file", "finished")]


def test_a_stream_waiting_on_the_owner_keeps_alive_and_the_client_reads_on(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api,
        monkeypatch: pytest.MonkeyPatch, gateway: Gateway) -> None:
    monkeypatch.setattr(openai_api, "KEEPALIVE_SECONDS", 0.2)  # the in-process gateway's
    write = Call("write_file", {"path": "kept-alive.txt", "content": "ok"})
    server.push(Reply(text="Asking.", tool_calls=[write]), Reply(text="Written."))
    body = {"model": "hearth", "stream": True, "messages": [user("write it, streaming")]}
    lines: list[str] = []

    def read() -> None:
        with httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=30,
                          headers={"Authorization": f"Bearer {TOKEN}",
                                   "X-Hearth-Session": "kept-alive"}) as response:
            assert response.status_code == 200
            lines.extend(response.iter_lines())

    thread, out = in_thread(read)
    approval = pending_in(api, "kept-alive")
    time.sleep(1.0)
    assert thread.is_alive()
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    thread.join(20)
    assert "error" not in out, out
    assert lines.count(": keepalive") >= 3
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]"
    # the official client reads such a stream as it reads OpenAI's
    server.push(Reply(text="Asking again.", tool_calls=[write]), Reply(text="Again."))
    thread, out = in_thread(lambda: "".join(
        c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="hearth", messages=[user("again")], stream=True, **named("kept-alive"))
        if c.choices))
    approval = pending_in(api, "kept-alive")
    time.sleep(0.8)
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    thread.join(20)
    assert out == {"result": "Asking again.\n\nAgain."}


def test_a_message_sent_into_a_running_turn_is_answered_by_that_turn(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    api.new_chat(name="steer", trust="trusted")
    hold, started = threading.Event(), threading.Event()
    server.push(Reply(tool_calls=[Call("list_dir", {"path": "."})], hold=hold, started=started),
                Reply(text="Both asks answered."))
    ask = client.chat.completions.create
    first_thread, first = in_thread(lambda: ask(
        model="hearth", messages=[user("the first ask")], **named("steer")))
    assert started.wait(10)
    second_thread, second = in_thread(lambda: ask(
        model="hearth", messages=[user("the second ask")], stream=True, **named("steer")))
    deadline = time.monotonic() + 10
    while "the second ask" not in [m["text"] for m in api.messages("steer")]:
        assert time.monotonic() < deadline, "the second ask was never admitted"
        time.sleep(0.05)
    hold.set()
    first_thread.join(20)
    second_thread.join(20)
    assert first["result"].choices[0].message.content == "Both asks answered."
    streamed = "".join(c.choices[0].delta.content or "" for c in second["result"] if c.choices)
    assert streamed == "Both asks answered."  # the turn it was sent into answered it
    assert server.requests[-1].messages[-1]["content"] == "the second ask"
    assert len(server.requests) >= 2 and server.pending() == 0


def test_a_stateless_stream_its_client_leaves_is_stopped_and_forgotten(
        server: ScriptedModelServer, gateway: Gateway) -> None:
    server.push(Reply(text="slow words of the okapi-bellows come", chunks=4, stall=30,
                      stall_after=1))
    body = {"model": "hearth", "stream": True, "messages": [user("speak slowly")]}
    with httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        run_id = response.headers["x-hearth-run"]
        for line in response.iter_lines():
            if '"content":"slow' in line:
                break
        assert db_rows(gateway, "SELECT status FROM runs WHERE run_id = ?", run_id) == [
            ("running",)]
    deadline = time.monotonic() + 15  # the model stalls for 30 s: its turn was stopped
    while db_rows(gateway, "SELECT count(*) FROM sessions WHERE origin = 'openai' "
                           "AND memory_mode = 'temporary'") != [(0,)]:
        assert time.monotonic() < deadline, "the request's chat was not forgotten"
        time.sleep(0.1)
    assert db_rows(gateway, "SELECT count(*) FROM runs WHERE run_id = ?", run_id) == [(0,)]


def test_a_named_chats_turn_goes_on_when_its_client_leaves(
        server: ScriptedModelServer, gateway: Gateway, api: Api) -> None:
    server.push(Reply(text="the whole answer arrives anyway", chunks=6, delay=0.3))
    body = {"model": "hearth", "stream": True, "messages": [user("answer even if I go")]}
    with httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {TOKEN}",
                               "X-Hearth-Session": "left"}) as response:
        run_id = response.headers["x-hearth-run"]
        for line in response.iter_lines():
            if '"content":"the' in line:
                break
    assert api.wait(run_id)["status"] == "complete"
    answers = [m["text"] for m in api.messages("left") if m["kind"] == "assistant"]
    assert answers == ["the whole answer arrives anyway"]


# ------------------------------------------------------------------------------- errors

def test_an_unknown_model_is_not_found_in_openais_shape(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="gpt-nothing", messages=[user("hi")])
    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["type"], body["code"], body["param"]) == (
        "invalid_request_error", "model_not_found", "model")
    assert "gpt-nothing" in body["message"] and "hearth" in body["message"]


def test_a_bad_token_is_refused_in_openais_shape(gateway: Gateway) -> None:
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="not-the-token") as wrong:
        with pytest.raises(openai.AuthenticationError) as raised:
            wrong.models.list()
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="hearth", messages=[user("hi")])
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "invalid_api_key"
    assert "not-the-token" not in body["message"]


@pytest.mark.parametrize(("request_body", "param", "words"), [
    ({"messages": [user("hi")], "n": 2}, "n", "n must be 1"),
    ({"messages": [user("hi"), {"role": "assistant", "content": "so"}]}, "messages",
     "last message must be the user's"),
    ({"messages": [user("   ")]}, "messages", "empty"),
    ({"messages": [{"role": "user", "content": [
        {"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}}]}]},
     "messages.0.content.0", "is not supported"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "so"}, user("and?")]},
     "messages.0.content", "in the last message only"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}]},
     "messages.0.content.0", "not valid base64"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://10.1.2.3/a.png"}}]}]},
     "messages", "could not be fetched"),
    ({"messages": [user("hi")], "user": "bob@example.com"}, "user", "names a Hearth chat"),
    ({"messages": [user("hi")], "tools": [{"type": "function",
                                           "function": {"name": "f"}}]}, "tools",
     "Hearth's own tools"),
])
def test_a_request_hearth_cannot_do_is_a_bad_request_with_a_sentence(
        client: openai.OpenAI, request_body: dict[str, Any], param: str, words: str,
        api: Api) -> None:
    before = listed(api)
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="hearth", **request_body)
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error" and body["param"] == param
    assert words in body["message"]
    assert listed(api) == before  # nothing was made or sent


def test_a_chat_is_named_once_and_by_a_valid_name(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="hearth", messages=[user("hi")], user="one",
                                       **named("two"))
    assert "two different chats" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="hearth", messages=[user("hi")],
                                       **named("no spaces please"))
    assert raised.value.body["code"] == "invalid_name"  # type: ignore[index]
    assert "X-Hearth-Session names a Hearth chat" in raised.value.message


@pytest.mark.parametrize(("content", "param"), [
    ('{"model": "hearth", "messages": [', None),
    ('{"model": "hearth"}', "messages"),
    ('{"model": "hearth", "messages": [], "stream": false}', "messages"),
    ('{"model": "hearth", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}',
     "stream"),
    ('{"model": 5, "messages": [{"role": "user", "content": "hi"}]}', "model"),
    ('{"model": "hearth", "messages": [{"role": "wizard", "content": "hi"}]}',
     "messages.0.role"),
])
def test_a_malformed_body_is_400_in_openais_shape(gateway: Gateway, content: str,
                                                  param: str | None) -> None:
    answer = httpx.post(gateway.url + "/v1/chat/completions", content=content, timeout=10,
                        headers={"Authorization": f"Bearer {TOKEN}",
                                 "Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"]


def _png() -> str:
    """A data URL of a real 2x2 PNG (an upload's bytes are checked as what they say)."""
    out = io.BytesIO()
    Image.new("RGB", (2, 2), (200, 40, 40)).save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


PNG = _png()


@pytest.mark.parametrize(("part", "param"), [
    ({"type": "image_url", "image_url": "https://example.com/a.png"},
     "messages.0.content.0.image_url"),
    ({"type": "image_url", "image_url": {"detail": "low"}}, "messages.0.content.0.image_url.url"),
    ({"type": "image_url", "image_url": {"url": 7}}, "messages.0.content.0.image_url.url"),
    ({"type": "input_audio", "input_audio": "UklGRg=="}, "messages.0.content.0.input_audio"),
    ({"type": "input_audio", "input_audio": {"data": 12, "format": "wav"}},
     "messages.0.content.0.input_audio.data"),
    ({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": ["wav"]}},
     "messages.0.content.0.input_audio.format"),
    ({"type": "file", "file": ["a.txt"]}, "messages.0.content.0.file"),
    ({"type": "file", "file": {"file_data": 3}}, "messages.0.content.0.file.file_data"),
    ({"text": "a part without its type"}, "messages.0.content.0.type"),
    ({"type": 5, "text": "a number for a type"}, "messages.0.content.0.type"),
    ({"type": "text", "text": 42}, "messages.0.content.0.text"),
    ({"type": "text"}, "messages.0.content.0.text"),
    ("a bare string among the parts", "messages.0.content.0"),
])
def test_a_content_part_of_the_wrong_shape_is_400_never_a_500(
        gateway: Gateway, api: Api, part: object, param: str) -> None:
    before = listed(api)
    body = {"model": "hearth", "messages": [{"role": "user", "content": [
        part, {"type": "text", "text": "and some words"}]}]}
    answer = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10,
                        headers={"Authorization": f"Bearer {TOKEN}", "X-Hearth-Session": "parts"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert error["message"]
    assert listed(api) == before  # nothing was made or sent


def test_a_message_may_send_twenty_files_and_no_more(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    parts: list[Any] = [{"type": "text", "text": "look at these"}]
    parts += [{"type": "image_url", "image_url": {"url": PNG}}] * 21
    before = listed(api)
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="hearth", messages=[
            {"role": "user", "content": parts}], **named("many-files"))
    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["code"], body["param"]) == ("too_many_files", "messages.0.content")
    assert "at most 20 files" in body["message"] and "21" in body["message"]
    assert listed(api) == before  # nothing was made, kept or sent
    server.push(Reply(text="Twenty seen."))
    answer = client.chat.completions.create(model="hearth", messages=[
        {"role": "user", "content": parts[:21]}], **named("many-files"))
    assert answer.choices[0].message.content == "Twenty seen."
    sent = [m for m in api.messages("many-files") if m["kind"] == "user"]
    assert len(sent) == 1 and len(sent[0]["meta"]["attachments"]) == 20


def test_the_v1_routes_speak_openais_shape_and_take_no_cookie(gateway: Gateway) -> None:
    gone = httpx.get(gateway.url + "/v1/embeddings", timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "invalid_request_error"
    wrong_method = httpx.get(gateway.url + "/v1/chat/completions", timeout=10,
                             headers={"Authorization": f"Bearer {TOKEN}"})
    assert wrong_method.status_code == 405 and set(wrong_method.json()["error"]) == {
        "message", "type", "param", "code"}
    cookie_only = httpx.get(gateway.url + "/v1/models", timeout=10,
                            cookies={"hearth_session": "anything"})
    assert cookie_only.status_code == 401
    assert cookie_only.json()["error"]["code"] == "invalid_api_key"


def test_a_turn_that_fails_at_the_provider_is_an_error_with_its_sentence_never_retried(
        client: openai.OpenAI, server: ScriptedModelServer, api: Api) -> None:
    server.push(Reply(status=500))
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="hearth", messages=[user("fail please")],
                                       **named("broken"))
    assert raised.value.status_code == 502
    assert raised.value.response.headers["x-should-retry"] == "false"
    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["type"], body["code"]) == ("server_error", "model_error")
    assert body["message"].startswith("The model call failed")
    users = [m for m in api.messages("broken") if m["kind"] == "user"]
    assert len(users) == 1  # the client did not send it again
    server.push(Reply(status=500))
    with pytest.raises(openai.InternalServerError) as raised:  # streamed: before any text
        list(client.chat.completions.create(model="hearth", messages=[user("fail")],
                                            stream=True))
    assert raised.value.body["code"] == "model_error"  # type: ignore[index]


def test_a_stream_cut_after_its_first_words_ends_with_an_error_event(
        client: openai.OpenAI, server: ScriptedModelServer) -> None:
    server.push(Reply(text="The beginning of a long answer", chunks=5, cut_after=2))
    got: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(
                model="hearth", messages=[user("tell me")], stream=True, **named("cut")):
            got.append(chunk.choices[0].delta.content or "")
    shown = "".join(got)
    assert shown and "The beginning of a long answer".startswith(shown)  # what came, then the end
    assert "cut off" in raised.value.message
    assert raised.value.body["code"] == "cut_off"  # type: ignore[index]


# ------------------------------------------------------------------------ the README's

EXAMPLE = '''\
import os
import uuid

from openai import OpenAI

client = OpenAI(base_url="http://127.0.0.1:8765/v1", api_key=os.environ["TOKEN"])

# a named chat: Hearth keeps its history, so send only the new message (the key makes the
# client's retries of this request one message)
answer = client.chat.completions.create(
    model="hearth", messages=[{"role": "user", "content": "Remember: my tea is black."}],
    extra_headers={"X-Hearth-Session": "tea", "Idempotency-Key": str(uuid.uuid4())})
print(answer.choices[0].message.content, answer.usage.total_tokens)

# stateless, streamed: the messages are the whole context, and nothing is kept
stream = client.chat.completions.create(
    model="hearth", stream=True,
    messages=[{"role": "system", "content": "Answer in one word."},
              {"role": "user", "content": "Capital of France?"}])
for chunk in stream:
    print(chunk.choices[0].delta.content or "", end="", flush=True)
print()
'''


def test_the_readmes_python_example_runs_as_written(
        gateway: Gateway, server: ScriptedModelServer, tmp_path: Path) -> None:
    page = API_PAGE.read_text("utf-8")
    assert "## The OpenAI-compatible API" in page
    assert EXAMPLE in page
    script = tmp_path / "example.py"
    script.write_text(EXAMPLE.replace("http://127.0.0.1:8765", gateway.url), encoding="utf-8")
    server.push(Reply(text="Noted.", usage=(9, 2)), Reply(text="Paris"))
    env = {**os.environ, "TOKEN": TOKEN}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Noted. 11\nParis\n"
    assert json.loads(json.dumps(server.requests[-1].messages[-1]))["content"] == (
        "Capital of France?")
