"""Saved prompts in the composer, in Chromium: typing @ at the start of a message lists the
saved prompts (filtered as the name is typed) under the new-chat page's box and above a chat's;
arrows move, Enter and Tab pick (Enter picking does not send), a click picks, Escape closes;
picking writes the name and its named placeholders; the message sent reaches the model
expanded. With no saved prompt, the list says where to put one. At desktop and phone widths,
under the page's CSP (no console errors)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def save_prompts(gateway: Gateway) -> None:
    folder = gateway.home / "prompts"
    folder.mkdir(exist_ok=True)
    (folder / "summarize.md").write_text(
        "# Summarize a topic\nSummarize {{topic}} in {{lines}} lines.", encoding="utf-8")
    (folder / "standup.md").write_text("Write my stand-up notes from what follows.",
                                       encoding="utf-8")
    (folder / "review.md").write_text("Review this code:\n{{arguments}}", encoding="utf-8")


def options(page: Page) -> list[str]:
    return page.locator("#mention-list .mention-name").all_inner_texts()


def test_at_lists_the_prompts_and_picking_one_fills_the_box_then_it_is_sent_expanded(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        console_errors: list[str], shot: Callable[[Page, str], Path]) -> None:
    save_prompts(gateway)
    page = signed_in(gateway)
    page.wait_for_load_state()  # its scripts ran
    page.set_viewport_size(DESKTOP)
    box = page.get_by_label("Message")
    listed = page.get_by_role("listbox", name="Saved prompts")
    box.press_sequentially("@")
    expect(listed).to_be_visible()
    assert options(page) == ["@review", "@standup", "@summarize"]
    expect(page.locator("#mention-0")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#mention-2 .mention-uses")).to_have_text("{{topic}} {{lines}}")
    box.press_sequentially("s")
    expect(page.locator("#mention-list .mention")).to_have_count(2)
    assert options(page) == ["@standup", "@summarize"]
    box_bottom = page.locator(".start .composer").bounding_box()
    list_box = listed.bounding_box()
    assert box_bottom and list_box and list_box["y"] >= box_bottom["y"] + box_bottom["height"]
    shot(page, "mentions-start-desktop")
    box.press("ArrowDown")
    expect(page.locator("#mention-1")).to_have_attribute("aria-selected", "true")
    box.press("Enter")  # picks; does not send
    expect(listed).to_be_hidden()
    expect(box).to_have_value("@summarize topic= lines=")
    assert box.evaluate("b => b.selectionStart") == len("@summarize topic=")
    assert page.url == f"{gateway.url}/"
    box.press_sequentially("cats")
    expect(box).to_have_value("@summarize topic=cats lines=")
    model_server.push(Reply(text="Cats purr."))
    box.press("Enter")  # the list is closed: this sends
    expect(page.locator(".item.user .text")).to_have_text("@summarize topic=cats lines=")
    expect(page.locator(".item.assistant .markdown")).to_have_text("Cats purr.")
    sent = [m for m in model_server.requests[-1].messages if m["role"] == "user"][-1]
    assert sent["content"] == "# Summarize a topic\nSummarize cats in  lines."
    assert console_errors == []


def test_on_a_phone_the_list_opens_above_a_chats_box_and_picks_by_tab_and_click(
        gateway: Gateway, signed_in: Callable[..., Page], console_errors: list[str],
        shot: Callable[[Page, str], Path]) -> None:
    save_prompts(gateway)
    page = signed_in(gateway)
    page.set_viewport_size(PHONE)
    key = gateway.client().new_chat()
    page.goto(f"{gateway.url}/chats/{key}")
    box = page.get_by_label("Message")
    listed = page.get_by_role("listbox", name="Saved prompts")
    box.press_sequentially("@")
    expect(listed).to_be_visible()
    composer = page.locator(".dock .composer").bounding_box()
    shown = listed.bounding_box()
    assert composer and shown
    assert shown["y"] + shown["height"] <= composer["y"]  # above the box, in the dock
    assert shown["x"] >= 0 and shown["x"] + shown["width"] <= PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, "mentions-chat-phone")
    box.press("Escape")
    expect(listed).to_be_hidden()
    box.press_sequentially("s")
    expect(listed).to_be_hidden()  # closed for this mention until it ends
    box.fill("")
    box.press_sequentially("@st")
    expect(listed).to_be_visible()
    box.press("Tab")
    expect(box).to_have_value("@standup ")
    expect(box).to_be_focused()
    box.fill("")
    box.press_sequentially("@r")
    page.locator("#mention-list .mention", has_text="@review").click()
    expect(box).to_have_value("@review ")
    expect(listed).to_be_hidden()
    assert console_errors == []


def test_with_no_saved_prompt_the_list_says_where_to_put_one(
        gateway: Gateway, signed_in: Callable[..., Page], console_errors: list[str],
        shot: Callable[[Page, str], Path]) -> None:
    page = signed_in(gateway)
    page.wait_for_load_state()  # its scripts ran
    page.set_viewport_size(DESKTOP)
    box = page.get_by_label("Message")
    box.press_sequentially("@")
    note = page.locator("#mention-list .mention-empty")
    expect(note).to_contain_text("No saved prompts yet")
    expect(note).to_contain_text(str(gateway.home / "prompts"))
    shot(page, "mentions-none")
    box.press_sequentially("x")
    expect(note).to_be_hidden()  # an @ with a name no prompt has is left alone
    box.fill("me@example.com")
    expect(page.locator("#mention-list")).to_be_hidden()
    assert console_errors == []
