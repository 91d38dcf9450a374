"""The chat page's branching routes (web/pages/branching.py) against a real gateway: each form
post moves the chat as its API door does and answers a page's script with JSON or a browser
with a redirect; bad input and the engine's refusals are the envelope to a script and a
sentence on a page to a browser, never a 500; a regenerated answer is drawn with its pager
live exactly as after a reload; and the map's ticks group an exchange's marks and link to the
page that holds each message."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from hearth.web.pages.branching import map_ticks
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.dashboard import FETCH, Page

BROWSER = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def setup(gateway: Gateway) -> Iterator[tuple[Api, Page]]:
    yield gateway.client(), Page(gateway)


def _answered(api: Api, server: ScriptedModelServer, key: str, text: str, reply: str) -> None:
    server.push(Reply(text=reply))
    assert api.wait(api.send(key, text)["run_id"])["status"] == "complete"


def _said(api: Api, key: str) -> list[tuple[str, str]]:
    return [(m["kind"], m["text"]) for m in api.messages(key)
            if m["kind"] in ("user", "assistant")]


def _item(html: str, seq: int) -> str:
    found = re.search(rf'(<li class="item[^"]*" id="seq-{seq}".*?\n</li>)', html, re.S)
    assert found, html
    return re.sub(r"\s+", " ", found.group(1)).strip()


def test_the_forms_move_the_chat_as_the_doors_do(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    _answered(api, model_server, key, "name a colour", "Red.")
    model_server.push(Reply(text="Blue."))
    again = page.post(f"/chats/{key}/regenerate", index="1", confirm="")
    assert again.status_code == 200, again.text
    api.wait(again.json()["run_id"])
    assert _said(api, key)[-1] == ("assistant", "Blue.")
    flipped = page.post(f"/chats/{key}/variant", headers={}, index="1", variant="0")
    assert flipped.status_code == 303 and flipped.headers["location"] == f"/chats/{key}"
    assert _said(api, key)[-1] == ("assistant", "Red.")
    model_server.push(Reply(text="Green."))
    edited = page.post(f"/chats/{key}/edit", index="0", text="name a tree colour")
    api.wait(edited.json()["run_id"])
    assert _said(api, key) == [("user", "name a tree colour"), ("assistant", "Green.")]
    back = page.post(f"/chats/{key}/rewind", index="1")
    assert back.json() == {"head_index": 1, "run_id": None}
    forked = page.post(f"/chats/{key}/fork", index="1")
    assert forked.status_code == 201
    made = forked.json()
    assert made["url"] == f"/chats/{made['key']}" and made["key"] != key
    assert _said(api, made["key"]) == _said(api, key)
    plain = page.post(f"/chats/{key}/fork", headers={}, index="0")
    assert plain.status_code == 303 and plain.headers["location"].startswith("/chats/")
    assert plain.headers["location"] not in (f"/chats/{key}", made["url"])


@pytest.mark.parametrize(("door", "form", "status", "code"), [
    ("regenerate", {"index": "0"}, 422, "not_an_answer"),
    ("regenerate", {"index": "-1"}, 422, "invalid_index"),
    ("variant", {"index": "1", "variant": "²"}, 422, "invalid_variant"),
    ("variant", {"index": "1", "variant": "5"}, 422, "variant_out_of_range"),
    ("edit", {"index": "9" * 40, "text": "x"}, 422, "invalid_index"),
    ("edit", {"index": "1", "text": "x"}, 422, "not_a_message_of_yours"),
    ("edit", {"index": "0", "text": " "}, 422, "empty_message"),
    ("rewind", {"index": "7"}, 404, "message_not_found"),
    ("rewind", {"index": "0", "confirm": "c" * 101}, 422, "invalid_confirm"),
    ("fork", {}, 422, "invalid_index"),
])
def test_bad_input_is_the_envelope_to_a_script_and_a_sentence_on_a_page(
        setup: tuple[Api, Page], model_server: ScriptedModelServer, door: str,
        form: dict[str, str], status: int, code: str) -> None:
    api, page = setup
    key = api.new_chat()
    _answered(api, model_server, key, "hi", "Hello.")
    scripted = page.post(f"/chats/{key}/{door}", **form)
    assert scripted.status_code == status, scripted.text
    assert scripted.json()["error"]["code"] == code
    shown = page.post(f"/chats/{key}/{door}", headers=BROWSER, **form)
    assert shown.status_code == status
    assert shown.headers["content-type"].startswith("text/html")
    assert scripted.json()["error"]["message"].split(";")[0] in shown.text.replace("&#39;", "'")


def test_the_routes_need_the_csrf_token(setup: tuple[Api, Page],
                                        model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    _answered(api, model_server, key, "hi", "Hello.")
    for door in ("regenerate", "edit", "rewind", "variant", "fork"):
        refused = page.http.post(f"/chats/{key}/{door}", data={"index": "1"}, headers=FETCH)
        assert refused.status_code == 403, (door, refused.text)
    assert _said(api, key) == [("user", "hi"), ("assistant", "Hello.")]


def test_the_repeat_guard_s_question_reaches_the_page_with_its_steps(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Wrote it."))
    api.wait(api.send(key, "write a.txt")["run_id"])
    asked = page.post(f"/chats/{key}/regenerate", index="1")
    assert asked.status_code == 409
    error = asked.json()["error"]
    assert error["code"] == "retry_repeats_steps" and error["steps"][0]["target"] == "a.txt"
    model_server.push(Reply(text="Again."))
    yes = page.post(f"/chats/{key}/regenerate", index="1", confirm=error["confirm"])
    assert yes.status_code == 200
    api.wait(yes.json()["run_id"])
    assert _said(api, key)[-1] == ("assistant", "Again.")


def test_a_regenerated_answer_is_drawn_live_with_its_pager_as_a_reload_draws_it(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    _answered(api, model_server, key, "name a colour", "Red.")
    model_server.push(Reply(text="Blue."))
    run_id = page.post(f"/chats/{key}/regenerate", index="1").json()["run_id"]
    api.wait(run_id)
    frames = page.frames(key, 1, lambda f: f["type"] == "message")
    live = next(f for f in frames if f["type"] == "message")
    assert live["message"]["kind"] == "assistant"
    drawn = re.sub(r"\s+", " ", live["html"]).strip()
    reloaded = _item(page.http.get(f"/chats/{key}").text, live["seq"])
    assert drawn == reloaded
    assert '<span class="pager-at">2/2</span>' in drawn
    assert 'name="index" value="1"' in drawn and ">Regenerate</button>" in drawn
    user = _item(page.http.get(f"/chats/{key}").text, 1)
    assert "data-edit" in user and 'name="index" value="0"' in user and "pager" not in user


def test_the_chat_page_draws_the_map_rail(setup: tuple[Api, Page],
                                          model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("list_files", {})]), Reply(text="Nothing."))
    api.wait(api.send(key, "what is <there>?")["run_id"])
    _answered(api, model_server, key, "and now", "Still nothing.")
    html = page.http.get(f"/chats/{key}").text
    rail = html.split('<nav class="chat-map"', 1)[1].split("</nav>", 1)[0]
    assert 'aria-label="Chat map"' in rail
    links = re.findall(r'<a href="([^"]+)" data-seq="(\d+)"[^>]*aria-label="([^"]+)"', rail)
    assert [(href, label) for href, _seq, label in links] == [
        ("#seq-1", "1. what is &lt;there&gt;? (1 tool call)"), (f"#seq-{links[1][1]}",
                                                                 "2. and now")]
    assert rail.count('class="dot tool"') == 1


def test_map_ticks_group_an_exchange_and_link_to_the_page_holding_it() -> None:
    def mark(kind: str, seq: int, preview: str = "") -> dict[str, Any]:
        return {"kind": kind, "seq": seq, "preview": preview}

    marks = [mark("assistant", 1, "an opening"), mark("user", 2, "first"),
             mark("tool", 3), mark("approval", 3), mark("tool", 5), mark("error", 6),
             mark("user", 8, "second"), mark("assistant", 9, "ok")]
    ticks = map_ticks(marks, "a chat", first_seq=8, before=None)
    assert [(t["seq"], t["dots"]) for t in ticks] == [
        (1, []), (2, ["tool", "approval", "tool", "error"]), (8, [])]
    assert ticks[1]["label"] == "2. first (2 tool calls, 1 approval, 1 error)"
    assert ticks[0]["label"] == "1. (no message)"
    assert ticks[1]["href"] == "/chats/a%20chat?before=3#seq-2"  # before the page's window
    assert ticks[2]["href"] == "#seq-8"
    older = map_ticks(marks, "k", first_seq=1, before=8)  # a page of earlier messages
    assert [t["href"] for t in older] == ["#seq-1", "#seq-2", "/chats/k?before=9#seq-8"]
    assert map_ticks([], "k", first_seq=None, before=None) == []
