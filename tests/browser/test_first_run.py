"""The first-run path in Chromium: a gateway with no model says so, leads to Settings, a model is
added and Tested there, and the first message is answered without a restart. Then the
Settings, Memory and Usage pages, each saved as a screenshot."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402


def test_a_new_user_adds_a_model_and_sends_a_first_message(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: Callable[..., Page], console_errors: list[str],
        shot: Callable[[Page, str], Path]) -> None:
    gateway = gateway_factory(model=False)
    began = time.monotonic()
    page = signed_in(gateway)
    expect(page.get_by_role("status")).to_contain_text("No model is set up")
    shot(page, "first-run-list")
    page.get_by_role("link", name="Add a model on the Settings page").click()
    page.get_by_label("Id", exact=True).fill("local")
    page.get_by_label("Model name").fill("fake-model")
    page.get_by_label("Base URL").fill(model_server.openai_base_url)
    page.get_by_label("API key").fill("sk-first-run-secret")
    page.get_by_role("button", name="Add model").click()
    expect(page.get_by_role("cell", name="local", exact=True)).to_be_visible()
    model_server.push(Reply(text="OK"))
    page.get_by_role("button", name="Test local").click()
    expect(page.locator(".test-ok")).to_be_visible()
    assert "sk-first-run-secret" not in page.content()
    shot(page, "settings")
    page.get_by_role("link", name="New chat").first.click()
    expect(page.get_by_text("No model is set up")).to_have_count(0)
    model_server.push(Reply(text="Hello, **welcome**."))
    page.get_by_label("Message").fill("hello")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".item.assistant .markdown strong")).to_have_text("welcome")
    print(f"first answer {time.monotonic() - began:.1f} s after the gateway was up")
    assert console_errors == []


def test_the_memory_and_usage_pages_show_what_a_turn_left(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str], shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Noted.", usage=(1200, 30)))
    api.wait(api.send(key, "hi")["run_id"])
    added = api.http.post("/api/memory", json={"kind": "preference",
                                               "text": "Prefers <b>tea</b> to coffee"})
    assert added.status_code in (200, 201), added.text
    page.get_by_role("link", name="Memory").click()
    expect(page.locator(".memory-text", has_text="Prefers <b>tea</b> to coffee")).to_be_visible()
    shot(page, "memory")
    page.get_by_role("button", name="Delete").first.click()
    expect(page.locator(".memory-text", has_text="Prefers <b>tea</b> to coffee")).to_have_count(0)
    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("img").first).to_be_visible()  # tokens per day, then per model
    expect(page.get_by_role("cell", name="1,200").first).to_be_visible()
    shot(page, "usage")
    assert console_errors == []
