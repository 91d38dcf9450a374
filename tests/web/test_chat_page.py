"""A chat's page and its live stream, against a real gateway and the scripted model server: one
renderer (a live frame draws what a reload draws), tool cards with receipts, approval cards,
Stop, Retry on an ending, queued messages, reconnecting from a seq, the footer, CSRF and the
Origin check on the page's routes. (The browser itself is driven in tests/browser.)"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.dashboard import Page


@pytest.fixture
def setup(gateway_factory: Callable[..., Gateway]) -> Iterator[tuple[Api, Page]]:
    gateway = gateway_factory()
    yield gateway.client(), Page(gateway)


def _norm(html: str) -> str:
    return re.sub(r"\s+", " ", html).strip()


def _items(page: str) -> dict[int, str]:
    """Each top-level item of the page's transcript, by seq."""
    body = page.split('id="transcript"', 1)[1].split("</ol>", 1)[0]
    found = re.findall(r'(<li class="item[^"]*" id="seq-(\d+)".*?\n</li>)', body, re.S)
    return {int(seq): _norm(markup) for markup, seq in found}


def _settled(frames: list[dict[str, Any]]) -> dict[int, str]:
    """What a live page holds once the frames are drawn: results placed in their cards."""
    items: dict[int, str] = {}
    cards: dict[str, int] = {}
    for frame in frames:
        if frame["type"] != "message":
            continue
        if frame["message"]["kind"] == "tool_result" and frame["target"] in cards:
            seq = cards[frame["target"]]
            waiting = '<p class="waiting">Running…</p>'
            assert waiting in items[seq]
            items[seq] = items[seq].replace(waiting, _norm(frame["html"]))
            continue
        html = frame.get("orphan_html") or frame["html"]
        items[frame["seq"]] = _norm(html)
        card = re.search(r'<article class="card" id="([^"]+)"', html)
        if card:
            cards[card.group(1)] = frame["seq"]
    return items


def test_a_live_turn_draws_exactly_what_a_reload_draws(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    model_server.push(Reply(text="Let me look.", tool_calls=[Call("list_files", {})]),
                      Reply(text="# Found\n\n* **one** file <script>x()</script>"))
    run = api.send(key, "what is <here>?")
    frames = page.frames(key, 0, lambda f: f["type"] == "done" or (
        f["type"] == "status" and not f["running"]))
    api.wait(run["run_id"])
    frames += page.frames(key, max(f.get("seq", 0) for f in frames),
                          lambda f: f["type"] == "status")
    live, reloaded = _settled(frames), _items(page.html(key))
    assert len(reloaded) >= 4 and live == reloaded
    answer = reloaded[max(reloaded)]
    assert "<h1>Found</h1>" in answer and "<strong>one</strong>" in answer
    assert "<script>" not in answer and "&lt;script&gt;" in answer
    assert 'class="tokens"' in answer and "first in the chat chain" in answer


def test_a_tool_card_carries_its_receipt_and_output(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "n.txt", "content": "hi"})]),
                      Reply(text="Written."))
    api.wait(api.send(key, "write it")["run_id"])
    card = next(v for v in _items(page.html(key)).values() if 'class="card"' in v)
    assert "write_file" in card and '"path": "n.txt"' in card.replace("&#34;", '"')
    receipt = re.search(r'<p class="receipt">(.*?)</p>', card)
    assert receipt and "n.txt" in receipt.group(1)


def _first_approval(page: Page, key: str) -> dict[str, Any]:
    frames = page.frames(key, 0, lambda f: f["type"] == "approval")
    return frames[-1]


@pytest.mark.parametrize("decision,outcome", [("allow_once", "Wrote"), ("deny", "denied")])
def test_an_approval_card_is_answered_from_the_page(
        setup: tuple[Api, Page], model_server: ScriptedModelServer, decision: str,
        outcome: str) -> None:
    api, page = setup
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Done."))
    run = api.send(key, "write a.txt")
    frame = _first_approval(page, key)
    assert frame["target"].startswith(f"card-{run['run_id']}-")
    for label in ("Allow once", "Always", "Deny"):
        assert f'value="{"allow_once" if label == "Allow once" else label.lower()}"' in \
            frame["html"].replace("allow_always", "always")
    reloaded = page.html(key)
    assert frame["html"].strip() in reloaded  # the same card on a reload
    approval_id = frame["approval"]["id"]
    assert page.post(f"/chats/{key}/approvals/{approval_id}", decision="sideways"
                     ).status_code == 422
    answered = page.post(f"/chats/{key}/approvals/{approval_id}", decision=decision)
    assert answered.status_code == 200, answered.text
    api.wait(run["run_id"])
    card = next(v for v in _items(page.html(key)).values() if 'class="card"' in v)
    assert outcome in card and 'class="approval action' not in card
    again = page.post(f"/chats/{key}/approvals/{approval_id}", decision="deny")
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_decided"


def test_always_from_the_card_grants_the_tool_or_only_the_scope_it_names(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat(trust="ask")
    write = Call("write_file", {"path": "notes/a.txt", "content": "x"})
    model_server.push(Reply(tool_calls=[write]), Reply(text="Done."))
    run = api.send(key, "write it")
    frame = _first_approval(page, key)
    assert 'name="prefix"' in frame["html"] and 'value="notes/a.txt"' in frame["html"]
    path = f"/chats/{key}/approvals/{frame['approval']['id']}"
    empty = page.post(path, decision="allow_always", scoped="on", prefix=" ")
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_prefix"
    scoped = page.post(path, decision="allow_always", scoped="on", prefix="notes/")
    assert scoped.json() == {"status": "allowed", "prefix": "notes/"}
    api.wait(run["run_id"])
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "notes/b.txt",
                                                            "content": "y"})]),
                      Reply(tool_calls=[Call("write_file", {"path": "elsewhere.txt",
                                                            "content": "z"})]))
    api.send(key, "two more")
    asked = page.frames(key, 0, lambda f: f["type"] == "approval"
                        and f["approval"]["status"] == "pending")[-1]
    assert asked["approval"]["target"] == "elsewhere.txt"  # notes/b.txt needed no asking


def test_always_is_refused_on_an_incognito_chats_card(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat(trust="ask", memory_mode="incognito")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]))
    api.send(key, "write it")
    approval_id = _first_approval(page, key)["approval"]["id"]
    refused = page.post(f"/chats/{key}/approvals/{approval_id}", decision="allow_always")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "restricted_session"
    assert api.http.get("/api/approvals").json()["approvals"][0]["status"] == "pending"


def test_an_approval_of_another_chat_is_not_answered_through_this_one(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key, other = api.new_chat(trust="ask"), api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]))
    api.send(key, "write a.txt")
    approval_id = _first_approval(page, key)["approval"]["id"]
    wrong = page.post(f"/chats/{other}/approvals/{approval_id}", decision="allow_once")
    assert wrong.status_code == 404
    assert api.http.get("/api/approvals").json()["approvals"][0]["status"] == "pending"


def test_stop_ends_the_turn_and_the_notice_offers_retry(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    started = threading.Event()
    model_server.push(Reply(text=" ".join(["word"] * 200), chunks=200, delay=0.05,
                            started=started))
    run = api.send(key, "talk slowly")
    assert started.wait(10)
    page.frames(key, 0, lambda f: f["type"] == "delta")  # it is streaming
    stopped = page.post(f"/chats/{key}/stop")
    assert stopped.status_code == 200 and stopped.json()["stopped"] == run["run_id"]
    assert api.wait(run["run_id"])["status"] == "stopped"
    items = _items(page.html(key))
    notice = items[max(items)]
    assert "You stopped this turn." in notice and ">Retry</button>" in notice
    assert 'class="item assistant partial"' in page.html(key)  # what arrived is kept
    model_server.push(Reply(text="Again, briefly."))
    retried = page.post(f"/chats/{key}/retry/{run['run_id']}")
    assert retried.status_code == 200, retried.text
    assert api.wait(retried.json()["run_id"])["status"] == "complete"
    assert "Again, briefly." in page.html(key)


def test_retry_of_another_chats_turn_is_refused(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key, other = api.new_chat(), api.new_chat()
    model_server.push(Reply(status=400))
    run = api.send(key, "hello")
    api.wait(run["run_id"])
    assert page.post(f"/chats/{other}/retry/{run['run_id']}").status_code == 404


def test_a_message_sent_during_a_turn_is_shown_queued_until_its_turn_starts(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    hold, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="first", hold=hold, started=started), Reply(text="second"))
    first = api.send(key, "one")
    assert started.wait(10)
    second = api.send(key, "two")
    items = _items(page.html(key))
    assert ">Queued</span>" in items[max(items)] and ">Queued</span>" not in items[1]
    queued_frame = page.frames(key, 1, lambda f: f["type"] == "message")[-1]
    assert ">Queued</span>" in queued_frame["html"]
    last = queued_frame["seq"]
    hold.set()
    frames = page.frames(key, last, lambda f: f["type"] == "status" and f.get("run_id") == second[
        "run_id"] and f["running"])
    assert frames[-1]["running"]
    api.wait(first["run_id"])
    api.wait(second["run_id"])
    assert ">Queued</span>" not in page.html(key)


def test_a_reload_mid_turn_shows_the_answer_so_far_and_reconnecting_skips_what_it_has(
        setup: tuple[Api, Page], model_server: ScriptedModelServer) -> None:
    api, page = setup
    key = api.new_chat()
    model_server.push(Reply(text="alpha beta gamma delta", chunks=4, delay=0.4))
    run = api.send(key, "go")
    last = int(re.search(r'data-last-seq="(\d+)"', page.html(key)).group(1))  # type: ignore[union-attr]
    assert f'data-running="{run["run_id"]}"' in page.html(key)
    page.frames(key, last, lambda f: f["type"] == "delta")
    resumed = page.frames(key, last, lambda f: f["type"] == "delta")  # a reload, mid-answer
    first_delta = resumed[-1]
    assert first_delta["offset"] == 0 and first_delta["text"].startswith("alpha")
    assert all(f["type"] != "message" for f in resumed)  # nothing it already has comes again
    api.wait(run["run_id"])
    after = page.frames(key, last, lambda f: f["type"] == "status")
    assert [f["message"]["kind"] for f in after if f["type"] == "message"] == ["assistant"]


def test_the_page_routes_need_csrf_and_the_stream_refuses_another_origin(
        setup: tuple[Api, Page]) -> None:
    api, page = setup
    key = api.new_chat()
    bare = page.http.post(f"/chats/{key}/stop", data={})
    assert bare.status_code == 403 and bare.json()["error"]["code"] == "csrf_failed"
    foreign = page.http.get(f"/chats/{key}/stream", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "forbidden_origin"
    plain = page.http.post(f"/chats/{key}/stop", data={"csrf": page.csrf})
    assert plain.status_code == 303  # a form post without the script goes back to the page
    assert page.http.get("/chats/nope/stream").status_code == 404
