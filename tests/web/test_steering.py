"""Steering: a message sent into a running turn is taken by it at its next step (the answer so
far first, then the message, marked `meta.steered`, `steered` in the 202); one the turn does
not take runs as the next queued turn, once.

The turn is held between its steps by a call waiting on the owner's approval (a chat that asks),
so the message arrives while the turn runs and before its next model call, every time."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine

from hearth.faults import EXIT_CODE
from hearth.store import search
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.approvals import pending_approvals

STEER = "Actually, name it b.txt next time."


def allow(api: Api, approval: dict[str, Any]) -> None:
    answer = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    assert answer.status_code == 200, answer.text


def run_of(api: Api, run_id: str) -> dict[str, Any]:
    return dict(api.http.get(f"/api/runs/{run_id}").json())


def sent(request: Any) -> list[tuple[str, str]]:
    """A model request's messages (the system prompt left out) as (role, content)."""
    return [(m["role"], m.get("content") or "") for m in request.messages
            if m["role"] != "system"]


def write_then(text: str) -> tuple[Reply, Reply]:
    """A first step that says something and asks to write a file, then an answer."""
    return (Reply(text="Let me write it.",
                  tool_calls=[Call("write_file", {"path": "a.txt", "content": "hello"})]),
            Reply(text=text))


@pytest.mark.parametrize("mode", ["persistent", "incognito", "temporary"])
def test_a_message_sent_into_a_running_turn_is_read_at_its_next_step(
        mode: str, gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask", memory_mode=mode)
    model_server.push(*write_then("Written; b.txt it is next time."))
    first = api.send(key, "write a file")["run_id"]
    approval = pending_approvals(api)[0]  # the turn waits between its steps
    steer = api.send(key, STEER, client_message_id="steer-1")
    assert steer["status"] == "steered"
    allow(api, approval)
    assert api.wait(first)["status"] == "complete"
    own = api.wait(steer["run_id"])
    assert (own["status"], own["ending"]) == ("complete", "steered")
    assert first in own["sentence"]

    # the turn's second model call read the message after the step before it
    assert len(model_server.requests) == 2
    assert sent(model_server.requests[1])[-1] == ("user", STEER)
    roles = [role for role, _ in sent(model_server.requests[1])]
    assert roles == ["user", "assistant", "tool", "user"]
    time.sleep(0.5)
    assert len(model_server.requests) == 2  # the message never ran as a turn of its own

    messages = api.messages(key)
    assert [(m["kind"], m["text"]) for m in messages if m["kind"] != "tool_call"] == [
        ("user", "write a file"), ("assistant", "Let me write it."),
        ("tool_result", "Wrote 5 bytes to a.txt."), ("user", STEER),
        ("assistant", "Written; b.txt it is next time.")]
    taken = next(m for m in messages if m["text"] == STEER)
    assert taken["run_id"] == first
    assert taken["meta"]["steered"]["run"] == steer["run_id"]
    assert [m["index"] for m in messages] == sorted(m["index"] for m in messages)

    again = api.send(key, STEER, client_message_id="steer-1")  # the same message, sent again
    assert (again["run_id"], again["status"], again["duplicate"]) == (
        steer["run_id"], "steered", True)
    assert [m["text"] for m in api.messages(key)].count(STEER) == 1


def test_a_later_turn_reads_the_message_where_it_was_taken(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(*write_then("Written."), Reply(text="Yes."))
    first = api.send(key, "write a file")["run_id"]
    approval = pending_approvals(api)[0]
    api.send(key, STEER)
    allow(api, approval)
    api.wait(first)
    api.wait(api.send(key, "all clear?")["run_id"])
    assert sent(model_server.requests[2]) == [
        ("user", "write a file"), ("assistant", "Let me write it."),
        ("tool", "Wrote 5 bytes to a.txt."), ("user", STEER), ("assistant", "Written."),
        ("user", "all clear?")]


def test_the_live_stream_shows_the_message_where_the_turn_took_it(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(*write_then("Written."))
    first = api.send(key, "write a file")["run_id"]
    approval = pending_approvals(api)[0]
    steer = api.send(key, STEER)
    allow(api, approval)
    frames = api.frames(key, after=steer["seq"],
                        until=lambda f: f["type"] == "done" and f["run_id"] == first)
    said = [(f["message"]["kind"], f["message"]["text"]) for f in frames
            if f["type"] == "message" and f["message"]["kind"] != "tool_call"]
    assert said == [("tool_result", "Wrote 5 bytes to a.txt."), ("user", STEER),
                    ("assistant", "Written.")]
    moved = next(f for f in frames if f["type"] == "message" and f["message"]["text"] == STEER)
    assert moved["seq"] > steer["seq"] and moved["run_id"] == first
    done = [(f["run_id"], f["ending"]) for f in frames if f["type"] == "done"]
    assert done == [(steer["run_id"], "steered"), (first, "complete")]


def test_a_message_sent_during_the_last_step_runs_as_the_next_turn_once(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="first", hold=release, started=started), Reply(text="second"))
    first = api.send(key, "one")["run_id"]
    assert started.wait(10)
    steer = api.send(key, "two")
    assert steer["status"] == "steered"
    release.set()
    assert api.wait(first)["status"] == "complete"
    own = api.wait(steer["run_id"])
    assert (own["status"], own["ending"]) == ("complete", "complete")  # answered as its own
    time.sleep(0.5)
    assert len(model_server.requests) == 2
    assert sent(model_server.requests[1]) == [("user", "one"), ("assistant", "first"),
                                              ("user", "two")]
    users = [m for m in api.messages(key) if m["kind"] == "user"]
    assert [m["text"] for m in users] == ["one", "two"]
    assert users[1]["run_id"] == steer["run_id"] and "steered" not in users[1]["meta"]


def test_stopping_the_turn_while_a_message_waits_runs_the_message_next_once(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(*write_then("never asked for"))
    model_server.default = Reply(text="Answering your second message.")
    first = api.send(key, "write a file")["run_id"]
    pending_approvals(api)
    steer = api.send(key, STEER)
    assert steer["status"] == "steered"
    assert api.http.post(f"/api/sessions/{key}/stop").status_code == 200
    assert api.wait(first)["status"] == "stopped"
    own = api.wait(steer["run_id"])
    assert (own["status"], own["ending"]) == ("complete", "complete")
    time.sleep(0.5)
    assert len(model_server.requests) == 2
    assert sent(model_server.requests[1])[-1] == ("user", STEER)
    assert model_server.requests[1].messages[-1]["content"] == STEER
    assert [m["text"] for m in api.messages(key)].count(STEER) == 1
    assert not (gateway.home / "workspace" / "a.txt").exists()


def test_a_message_queued_before_the_turn_began_reads_the_taken_one_in_place(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """A message sent while its chat's turn still waited for a slot is queued (no turn ran to
    take it); the turn then takes a later one. When the queued message runs, it reads the
    earlier turn whole, the message it took in its place, then its own question. Before: the
    taken message, sent after the queued one, was kept out of its context."""
    gateway = gateway_factory(config="[gateway]\nmax_concurrent_turns = 1\n")
    api = gateway.client()
    busy, key = api.new_chat(), api.new_chat(trust="ask")
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="busy", hold=release, started=started))
    held = api.send(busy, "hold the only slot")["run_id"]
    assert started.wait(10)
    first = api.send(key, "write a file")["run_id"]
    queued = api.send(key, "and then this")
    assert queued["status"] == "queued"  # its chat's turn is not running yet
    model_server.push(*write_then("Written."), Reply(text="This too."))
    release.set()
    api.wait(held)
    approval = pending_approvals(api)[0]
    assert api.send(key, STEER)["status"] == "steered"
    allow(api, approval)
    api.wait(first)
    assert api.wait(queued["run_id"])["status"] == "complete"
    assert sent(model_server.requests[-1]) == [
        ("user", "write a file"), ("assistant", "Let me write it."),
        ("tool", "Wrote 5 bytes to a.txt."), ("user", STEER), ("assistant", "Written."),
        ("user", "and then this")]


@pytest.mark.process_gateway  # a real os._exit right after the take, then a restart
def test_a_crash_right_after_the_take_leaves_the_message_the_turns_alone(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(env={"HEARTH_CRASH_AT": "steer_taken"})
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(write_then("never read")[0])
    first = api.send(key, "write a file")["run_id"]
    approval = pending_approvals(api)[0]
    steer = api.send(key, STEER)
    assert steer["status"] == "steered"
    allow(api, approval)
    assert gateway.proc is not None and gateway.proc.wait(20) == EXIT_CODE
    model_server.reset()
    model_server.default = Reply(text="Written; b.txt next time.")
    gateway.extra_env = {}
    gateway.start()
    api = gateway.client()
    assert api.wait(first)["status"] == "complete"  # the turn resumed, the message its own
    own = run_of(api, steer["run_id"])
    assert (own["status"], own["ending"]) == ("complete", "steered")
    time.sleep(0.5)
    assert len(model_server.requests) == 1  # the message was not run as a turn of its own
    said = sent(model_server.requests[0])
    assert said[-1] == ("user", STEER) and [t for _, t in said].count(STEER) == 1
    messages = api.messages(key)
    assert [m["text"] for m in messages].count(STEER) == 1
    assert [m["kind"] for m in messages if m["kind"] != "notice"] == [
        "user", "assistant", "tool_call", "tool_result", "user", "assistant"]
    assert (gateway.home / "workspace" / "a.txt").read_text() == "hello"  # written once


@pytest.mark.process_gateway  # a real os._exit as the message is admitted, then a restart
def test_a_crash_before_the_take_runs_the_message_once(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """The gateway dies right after the message sent into the turn is written (before any
    acknowledgement). After the restart the turn resumes without it (its first model call
    takes nothing) and answers; the message then runs as its own turn, once."""
    gateway = gateway_factory(env={"HEARTH_CRASH_AT": "queued"})
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(write_then("never read")[0])
    first = api.send(key, "write a file")["run_id"]
    pending_approvals(api)
    with pytest.raises(httpx.HTTPError):
        api.http.post(f"/api/sessions/{key}/messages", json={"text": STEER})
    assert gateway.proc is not None and gateway.proc.wait(20) == EXIT_CODE
    model_server.reset()
    model_server.push(Reply(text="Written."), Reply(text="b.txt next time, noted."))
    gateway.extra_env = {}
    gateway.start()
    api = gateway.client()
    allow(api, pending_approvals(api)[0])
    assert api.wait(first)["status"] == "complete"
    users = [m for m in api.messages(key) if m["kind"] == "user"]
    assert [m["text"] for m in users] == ["write a file", STEER]
    own = api.wait(users[1]["run_id"])
    assert (own["status"], own["ending"]) == ("complete", "complete")
    time.sleep(0.5)
    assert len(model_server.requests) == 2
    assert STEER not in [t for _, t in sent(model_server.requests[0])]  # not taken: not read
    assert sent(model_server.requests[1])[-1] == ("user", STEER)


def test_search_finds_the_taken_message_once_where_it_now_is_and_forgets_it_with_the_chat(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """The search index names a message by its seq: moving the message moves its entry (the
    row is taken out and written again, so the index's own triggers follow). Before: the entry
    kept the seq the message was sent at, which no longer held it, and outlived the chat."""
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(*write_then("Written."))
    first = api.send(key, "write a file")["run_id"]
    approval = pending_approvals(api)[0]
    api.send(key, "Actually, name it zanzibar.txt")
    allow(api, approval)
    api.wait(first)
    taken = next(m for m in api.messages(key) if m["text"].startswith("Actually"))
    store = create_engine(f"sqlite:///{gateway.home / 'hearth.db'}")
    with store.connect() as conn:
        hits = search.search(conn, "zanzibar", search.Filters()).hits
    store.dispose()
    assert [(h.session_key, h.seq, h.kind) for h in hits] == [(key, taken["index"], "user")]
    assert api.http.delete(f"/api/sessions/{key}").status_code == 200
    with sqlite3.connect(gateway.home / "hearth.db") as db:
        left = db.execute("SELECT count(*) FROM chat_search_messages WHERE session_key = ?",
                          (key,)).fetchone()[0]
        words = db.execute("SELECT count(*) FROM chat_search WHERE chat_search MATCH "
                           "'zanzibar'").fetchone()[0]
    assert (left, words) == (0, 0)
