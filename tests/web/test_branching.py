"""Branching a chat through the API: regenerate keeps variants the owner flips between (and
the model reads the one chosen), edit branches from the message's parent, rewind moves the
head back, fork copies the path into a new chat; every door that runs a turn again asks first
when its attempt may have changed something, and bad addresses get the envelope."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway


def said(api: Api, key: str) -> list[tuple[str, str]]:
    return [(m["kind"], m["text"]) for m in api.messages(key)
            if m["kind"] in ("user", "assistant")]


def last_prompt(server: ScriptedModelServer) -> str:
    """What the model was sent last, as one string of its messages' texts."""
    body = server.requests[-1].body
    return "\n".join(str(m.get("content")) for m in body["messages"])


def answered(api: Api, key: str, text: str, server: ScriptedModelServer, reply: str) -> None:
    server.push(Reply(text=reply))
    assert api.wait(api.send(key, text)["run_id"])["status"] == "complete"


def post(api: Api, path: str, body: dict[str, Any] | None = None) -> Any:
    return api.http.post(path, json=body or {})


def test_regenerate_keeps_the_answer_as_a_variant_and_the_choice_is_read_next(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    answered(api, key, "name a colour", model_server, "Red.")
    model_server.push(Reply(text="Blue."))
    again = post(api, f"/api/sessions/{key}/regenerate")
    assert again.status_code == 202, again.text
    assert api.wait(again.json()["run_id"])["status"] == "complete"
    assert "Red." not in last_prompt(model_server)  # the answer asked again is not shown to it
    shown = api.messages(key)
    assert said(api, key) == [("user", "name a colour"), ("assistant", "Blue.")]
    assert shown[1]["variants"] == {"count": 2, "index": 1}
    assert [m["visible_index"] for m in shown] == [0, 1]
    answered(api, key, "why?", model_server, "Because.")  # the regenerated answer is read next
    assert "Blue." in last_prompt(model_server) and "Red." not in last_prompt(model_server)
    flipped = post(api, f"/api/sessions/{key}/variant", {"index": 1, "variant": 0})
    assert flipped.status_code == 200, flipped.text
    assert flipped.json() == {"head_index": 1, "run_id": None}
    assert said(api, key)[-1] == ("assistant", "Red.")
    answered(api, key, "and another?", model_server, "Green.")
    assert "Red." in last_prompt(model_server) and "Blue." not in last_prompt(model_server)
    gateway.stop()
    gateway.start()
    api = gateway.client()
    assert said(api, key) == [("user", "name a colour"), ("assistant", "Red."),
                              ("user", "and another?"), ("assistant", "Green.")]
    post(api, f"/api/sessions/{key}/variant", {"index": 1, "variant": 1})
    assert said(api, key) == [("user", "name a colour"), ("assistant", "Blue."),
                              ("user", "why?"), ("assistant", "Because.")]
    back = post(api, f"/api/sessions/{key}/variant", {"index": 1, "variant": 0})
    assert said(api, key)[-1] == ("assistant", "Green.")  # its continuation comes back too
    assert back.json()["head_index"] == 3


def test_edit_branches_from_the_message_s_parent(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    answered(api, key, "hello", model_server, "Hi.")
    answered(api, key, "tell me about cats", model_server, "Cats purr.")
    model_server.push(Reply(text="Dogs bark."))
    edited = post(api, f"/api/sessions/{key}/edit", {"index": 2, "text": "tell me about dogs"})
    assert edited.status_code == 202, edited.text
    api.wait(edited.json()["run_id"])
    assert said(api, key) == [("user", "hello"), ("assistant", "Hi."),
                              ("user", "tell me about dogs"), ("assistant", "Dogs bark.")]
    prompt = last_prompt(model_server)
    assert "tell me about dogs" in prompt and "cats" not in prompt and "Hi." in prompt
    assert api.messages(key)[2]["variants"] == {"count": 2, "index": 1}
    post(api, f"/api/sessions/{key}/variant", {"index": 2, "variant": 0})
    assert said(api, key)[2:] == [("user", "tell me about cats"), ("assistant", "Cats purr.")]


def test_rewind_to_an_answer_moves_the_head_and_runs_nothing(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    answered(api, key, "one", model_server, "First.")
    answered(api, key, "two", model_server, "Second.")
    before = len(model_server.requests)
    moved = post(api, f"/api/sessions/{key}/rewind", {"index": 1})
    assert moved.status_code == 200 and moved.json() == {"head_index": 1, "run_id": None}
    assert len(model_server.requests) == before
    assert said(api, key) == [("user", "one"), ("assistant", "First.")]
    answered(api, key, "three", model_server, "Third.")
    assert "two" not in last_prompt(model_server).split("\n")
    again = post(api, f"/api/sessions/{key}/rewind", {"index": 0})  # a message of the owner's
    assert again.status_code == 200 and again.json()["run_id"]  # is answered again
    api.wait(again.json()["run_id"])
    assert said(api, key) == [("user", "one"), ("assistant", "ok")]


def test_fork_copies_the_path_into_a_new_chat(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    answered(api, key, "plan a trip", model_server, "Where to?")
    answered(api, key, "Rome", model_server, "Rome it is.")
    made = post(api, f"/api/sessions/{key}/fork", {"index": 1})
    assert made.status_code == 201, made.text
    fork = made.json()["key"]
    assert fork != key and made.json()["session"]["memory_mode"] == "persistent"
    assert said(api, fork) == [("user", "plan a trip"), ("assistant", "Where to?")]
    answered(api, fork, "Paris", model_server, "Paris it is.")
    prompt = last_prompt(model_server)
    assert "plan a trip" in prompt and "Rome" not in prompt
    assert len(said(api, key)) == 4  # the chat forked from is as it was


def test_a_restricted_chat_forks_only_into_its_own_mode(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(memory_mode="incognito")
    answered(api, key, "secret plan", model_server, "Noted.")
    out = post(api, f"/api/sessions/{key}/fork", {"index": 1, "memory_mode": "persistent"})
    assert out.status_code == 409 and out.json()["error"]["code"] == "fork_mode_fixed"
    assert "secret plan" not in out.text
    same = post(api, f"/api/sessions/{key}/fork", {"index": 1})
    assert same.status_code == 201 and same.json()["session"]["memory_mode"] == "incognito"


def test_every_door_that_runs_a_turn_again_asks_after_a_side_effect(
        gateway: Gateway, model_server: ScriptedModelServer, home: Path) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Wrote it."))
    api.wait(api.send(key, "write a.txt")["run_id"])
    doors = {"regenerate": {}, "rewind": {"index": 0},
             "edit": {"index": 0, "text": "write a.txt"}}  # the same words: a resend
    for door, body in doors.items():
        asked = post(api, f"/api/sessions/{key}/{door}", body)
        assert asked.status_code == 409, (door, asked.text)
        error = asked.json()["error"]
        assert error["code"] == "retry_repeats_steps"
        assert error["steps"][0]["tool"] == "write_file"
    changed = post(api, f"/api/sessions/{key}/edit", {"index": 0, "text": "write b.txt"})
    assert changed.status_code == 202  # new words are a new message: not asked about
    api.wait(changed.json()["run_id"])
    post(api, f"/api/sessions/{key}/variant", {"index": 0, "variant": 0})
    asked = post(api, f"/api/sessions/{key}/regenerate").json()["error"]
    model_server.push(Reply(text="Again."))
    yes = post(api, f"/api/sessions/{key}/regenerate", {"confirm": asked["confirm"]})
    assert yes.status_code == 202
    api.wait(yes.json()["run_id"])
    with sqlite3.connect(home / "hearth.db") as db:
        rows = db.execute("SELECT action, json_extract(detail, '$.outcome') FROM audit "
                          "WHERE action LIKE 'chat.%' ORDER BY id").fetchall()
    assert ("chat.rewind", "needs_confirm") in rows
    assert ("chat.edit_resend", "needs_confirm") in rows
    assert rows[-2:] == [("chat.regenerate", "allowed"), ("chat.regenerate", None)]


def test_doors_refuse_bad_addresses_and_a_running_turn(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    answered(api, key, "hi", model_server, "Hello.")
    cases = [("fork", {"index": 9}, 404, "message_not_found"),
             ("edit", {"index": 7, "text": "x"}, 404, "message_not_found"),
             ("edit", {"index": 1, "text": "x"}, 422, "not_a_message_of_yours"),
             ("edit", {"index": 0, "text": "  "}, 422, "empty_message"),
             ("rewind", {"index": -1}, 422, None),
             ("variant", {"index": 1, "variant": 1}, 422, "variant_out_of_range"),
             ("regenerate", {"index": 0}, 422, "not_an_answer"),
             ("fork", {"index": 0, "memory_mode": "loud"}, 422, "invalid_memory_mode"),
             ("edit", {"index": 0, "text": "x", "extra": 1}, 422, None)]
    for door, body, status, code in cases:
        answer = post(api, f"/api/sessions/{key}/{door}", body)
        assert answer.status_code == status, (door, body, answer.text)
        assert "error" in answer.json()
        if code is not None:
            assert answer.json()["error"]["code"] == code, (door, body, answer.text)
    assert post(api, "/api/sessions/nope/regenerate").status_code == 404
    release = threading.Event()
    model_server.push(Reply(text="slow", hold=release))
    run_id = api.send(key, "wait")["run_id"]
    busy = post(api, f"/api/sessions/{key}/regenerate")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "turn_running"
    assert "stop it" in busy.json()["error"]["message"]
    release.set()
    api.wait(run_id)


def test_an_answer_whose_turn_began_with_a_tool_call_flips_both_ways(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """The turn's variants are its first steps (here a tool call); its answer shows them and
    is the address that flips them, forward and back."""
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("read_file", {"path": "nope.txt"})]),
                      Reply(text="Nothing there."))
    api.wait(api.send(key, "read nope.txt")["run_id"])
    model_server.push(Reply(text="I won't look."))
    api.wait(post(api, f"/api/sessions/{key}/regenerate").json()["run_id"])
    assert api.messages(key)[-1]["variants"] == {"count": 2, "index": 1}
    post(api, f"/api/sessions/{key}/variant", {"index": 1, "variant": 0})
    answer = [m for m in api.messages(key) if m["kind"] == "assistant"][-1]
    assert answer["text"] == "Nothing there."
    assert answer["variants"] == {"count": 2, "index": 0}
    forward = post(api, f"/api/sessions/{key}/variant",
                   {"index": answer["visible_index"], "variant": 1})
    assert forward.status_code == 200, forward.text
    assert said(api, key)[-1] == ("assistant", "I won't look.")
