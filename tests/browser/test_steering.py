"""A message sent from the chat page while the turn runs, in Chromium: shown queued while it
waits, then drawn once, where the turn took it (after the step it had run, before the answer
that read it), marked as sent into the running turn, without a reload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway

STEER = "Actually, call it b.txt next time."


def test_a_message_sent_into_the_running_turn_is_drawn_where_the_turn_took_it(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str], shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(text="Let me write it.",
                            tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Written; b.txt next time."))
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads
    api.send(key, "write a.txt")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()  # between its steps
    page.get_by_label("Message").fill(STEER)
    page.get_by_label("Message").press("Enter")
    sent = page.locator(".item.user", has_text=STEER)
    expect(sent.locator(".pill.queued")).to_have_text("Queued")
    shot(page, "chat-steer-waiting")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator(".item.assistant .markdown").last).to_have_text(
        "Written; b.txt next time.")
    expect(sent).to_have_count(1)  # drawn once: where the turn took it, not where it was sent
    expect(sent.locator(".pill.steered")).to_have_text("Sent into the running turn")
    order = page.locator("#transcript > li").evaluate_all(
        "items => items.map(i => i.className.includes('tool') ? 'tool'"
        " : i.querySelector('.text, .markdown')?.textContent.trim())")
    assert order == ["write a.txt", "Let me write it.", "tool", STEER,
                     "Written; b.txt next time."], order
    assert page.evaluate("window.__sameDocument === true")
    shot(page, "chat-steer-taken")
    assert console_errors == []
