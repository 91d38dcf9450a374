"""The chat page live, in Chromium: the answer streams in without a reload, a tool card fills in
with its receipt, approval cards are answered, Stop ends a turn, a reload mid-turn keeps
streaming, a dropped connection resumes without duplicates, Retry runs an ending again, and
hostile tool output is inert."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.browser import open_chat, same_document

SlowText = " ".join(f"w{i}" for i in range(60))




def test_a_message_sent_from_the_page_streams_its_answer_in(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str], shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    model_server.push(Reply(text=SlowText + " **end**", chunks=30, delay=0.08))
    open_chat(page, gateway, key)
    page.get_by_label("Message").fill("tell me a long thing")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".item.user .text")).to_have_text("tell me a long thing")
    streaming = page.locator("#streaming .text")
    expect(streaming).to_contain_text("w3")  # part of the answer, before it is finished
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    shot(page, "chat-streaming")
    answer = page.locator(".item.assistant .markdown strong")
    expect(answer).to_have_text("end")
    expect(page.locator("#streaming")).to_have_count(0)
    expect(page.locator(".turn-details .model")).to_have_text("fake-model")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert same_document(page) and page.get_by_label("Message").input_value() == ""
    shot(page, "chat-answered")
    assert console_errors == []


def test_a_tool_card_fills_in_with_its_receipt_live(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "n.txt", "content": "hi"})]),
                      Reply(text="Written."))
    open_chat(page, gateway, key)
    api.send(key, "write n.txt")
    card = page.get_by_role("article", name="Tool call write_file")
    expect(card.locator(".receipt")).to_contain_text("n.txt")
    expect(page.locator(".item.assistant .markdown")).to_have_text("Written.")
    assert same_document(page)
    shot(page, "chat-tool-card")


def _approval_turn(gateway: Gateway, model_server: ScriptedModelServer, page: Page) -> Api:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Finished."))
    open_chat(page, gateway, key)
    api.send(key, "write a.txt")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    return api


def test_allow_once_on_the_card_runs_the_call(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    _approval_turn(gateway, model_server, page)
    waiting = page.locator(".card .result-slot .waiting")  # asked, live: nothing runs yet
    expect(waiting).to_have_text("Not run yet: it waits for your answer.")
    shot(page, "chat-approval")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator(".card .receipt")).to_contain_text("Wrote")
    expect(page.get_by_role("button", name="Allow once")).to_have_count(0)
    expect(page.locator(".item.assistant .markdown")).to_have_text("Finished.")


def test_deny_on_the_card_refuses_the_call(
        gateway: Gateway, model_server: ScriptedModelServer,
        signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    _approval_turn(gateway, model_server, page)
    page.get_by_role("button", name="Deny").click()
    expect(page.locator(".card .receipt")).to_contain_text("denied")
    expect(page.get_by_role("button", name="Deny")).to_have_count(0)


def test_stop_ends_the_turn_and_retry_runs_it_again(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    started = threading.Event()
    model_server.push(Reply(text=SlowText, chunks=60, delay=0.2, started=started))
    open_chat(page, gateway, key)
    api.send(key, "go on at length")
    expect(page.locator("#streaming .text")).to_contain_text("w1")
    page.get_by_role("button", name="Stop").click()
    notice = page.locator(".item.notice")
    expect(notice).to_contain_text("You stopped this turn.")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator(".item.assistant.partial")).to_have_count(1)
    shot(page, "chat-stopped")
    model_server.push(Reply(text="Short this time."))
    notice.get_by_role("button", name="Retry").click()
    expect(page.locator(".item.assistant:not(.partial) .markdown")).to_have_text(
        "Short this time.")
    assert same_document(page)


def test_a_reload_mid_turn_shows_the_answer_so_far_and_keeps_streaming(
        gateway: Gateway, model_server: ScriptedModelServer,
        signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text=SlowText + " last", chunks=30, delay=0.15))
    open_chat(page, gateway, key)
    api.send(key, "stream slowly")
    expect(page.locator("#streaming .text")).to_contain_text("w5")
    page.reload()
    expect(page.locator("#streaming .text")).to_contain_text("w0 w1")  # from the start
    expect(page.locator(".item.assistant .markdown")).to_contain_text("last", timeout=20_000)
    expect(page.locator(".item.assistant")).to_have_count(1)
    expect(page.locator(".item.user")).to_have_count(1)


def test_a_dropped_connection_resumes_from_the_last_seq_without_duplicates(
        gateway: Gateway, model_server: ScriptedModelServer,
        signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="first answer"))
    api.wait(api.send(key, "one")["run_id"])
    open_chat(page, gateway, key)
    expect(page.locator(".item")).to_have_count(2)
    gateway.stop()  # the connection drops; the page keeps trying
    expect(page.locator("html[data-stream=reconnecting]")).to_have_count(1)
    gateway.start()
    api = gateway.client()
    expect(page.locator("html[data-stream=open]")).to_have_count(1, timeout=20_000)
    model_server.push(Reply(text="second answer"))
    api.wait(api.send(key, "two")["run_id"])
    expect(page.locator(".item.assistant")).to_have_count(2)
    expect(page.locator(".item")).to_have_count(4)  # nothing drawn twice
    assert same_document(page)


def test_an_answer_streaming_across_a_gateway_restart_is_drawn_once(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: Callable[..., Page]) -> None:
    """The restarted gateway streams the resumed answer from offset 0 again; the page sees the
    new start on its `status` frame and does not read those offsets as the old stream's."""
    gateway = gateway_factory()
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    model_server.push(Reply(text="a long first part, then more", chunks=2, stall=10,
                            stall_after=1))
    model_server.default = Reply(text="short, then the rest", chunks=2, stall=6, stall_after=1)
    open_chat(page, gateway, key)
    gateway.client().send(key, "go on")
    expect(page.locator("#streaming .text")).to_have_text("a long first p")  # half (by chars)
    gateway.kill()  # the running turn is left to the next start, which resumes it
    gateway.start()
    # the resumed answer's first words, shorter than what streamed before: drawn as they are
    expect(page.locator("#streaming .text")).to_have_text("short, the", timeout=20_000)
    answers = page.locator(".item.assistant:not(.partial) .markdown")
    expect(answers).to_have_text("short, then the rest", timeout=20_000)
    expect(page.locator("#streaming")).to_have_count(0)
    assert same_document(page)


def test_hostile_tool_output_is_inert_live(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    hostile = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
               '<a href="javascript:window.__pwned=3">x</a>')
    write = Call("write_file", {"path": "h.html", "content": hostile})
    model_server.push(Reply(tool_calls=[write]),
                      Reply(tool_calls=[Call("read_file", {"path": "h.html"})]),
                      Reply(text=f"[click](javascript:window.__pwned=4) {hostile}"))
    open_chat(page, gateway, key)
    api.send(key, "write and read it")
    expect(page.locator(".item.assistant")).to_have_count(1)
    expect(page.locator("pre.output").last).to_contain_text("<script>window.__pwned=1</script>")
    transcript = page.locator("#transcript")
    assert transcript.locator("script, img, [onerror]").count() == 0
    assert transcript.locator('a[href^="javascript:"]').count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert console_errors == []
