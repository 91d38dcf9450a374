"""A chat's helpers on its page, in Chromium: listed under the chat with the one at work
marked, a helper's own page saying whose it is, and Stop offering to stop the helpers at work
too, which stops both (the chat is then told its helper did not do its work)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway


def test_stop_offers_to_stop_the_helpers_at_work_too(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str], shot: Callable[[Page, str], Path]) -> None:
    release = threading.Event()
    model_server.push(Reply(tool_calls=[Call("spawn_helpers", {"tasks": ["survey the shelf"]})]))
    model_server.default = Reply(text="still going", hold=release)  # both turns wait
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    api.send(key, "get a helper to survey the shelf")
    deadline = time.monotonic() + 20
    while not api.http.get(f"/api/sessions/{key}").json()["helpers"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    page.goto(f"{gateway.url}/chats/{key}")
    strip = page.get_by_role("navigation", name="This chat's helpers")
    expect(strip.get_by_role("link")).to_have_text("survey the shelf · working")
    offer = page.get_by_label("and its 1 helper at work")
    expect(offer).to_be_visible()
    shot(page, "chat-helpers-working")
    offer.check()
    with page.expect_response(lambda r: r.url.endswith(f"/chats/{key}/stop")) as stopping:
        page.get_by_role("button", name="Stop").click()
    assert stopping.value.ok  # both turns stopped before the model may answer them
    release.set()
    note = page.locator(".item.notice", has_text="did not do its work")
    expect(note).to_be_visible(timeout=20_000)
    helper = api.http.get(f"/api/sessions/{key}").json()["helpers"][0]
    assert helper["working"] is False
    page.goto(f"{gateway.url}/chats/{helper['key']}")
    expect(page.locator(".helper-of")).to_contain_text("A helper.")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "chat-helper-page-phone")
    assert console_errors == []
