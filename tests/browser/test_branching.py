"""Branching a chat on its page, in Chromium: Regenerate keeps the answer as a variant and the
pager flips between them (the choice survives a reload), Edit sends new words in place of a
message, Fork from here opens a new chat with the messages up to there, Rewind to here sets the
rest aside, the map's rail jumps to a message, the repeat guard asks before a turn that wrote a
file runs again, another tab's regenerate shows up live, and the controls fit a phone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Browser, Locator, Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway  # noqa: E402
from tests.support.browser import open_chat, same_document, signed_in_context  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]
PHONE = {"width": 390, "height": 844}


def _answered(api: Api, server: ScriptedModelServer, key: str, text: str, reply: str) -> None:
    server.push(Reply(text=reply))
    assert api.wait(api.send(key, text)["run_id"])["status"] == "complete"




def _answers(page: Page) -> Locator:
    return page.locator(".item.assistant .markdown")


def _said(api: Api, key: str) -> list[tuple[str, str]]:
    return [(m["kind"], m["text"]) for m in api.messages(key)
            if m["kind"] in ("user", "assistant")]



def test_regenerate_then_flip_the_variants_and_a_reload_keeps_the_choice(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "name a colour", "Red.")
    open_chat(page, gateway, key)
    answer = page.locator(".item.assistant")
    regenerate = answer.get_by_role("button", name="Regenerate")
    expect(regenerate).to_have_css("opacity", "0")  # quiet until the answer is pointed at
    answer.hover()
    expect(regenerate).to_have_css("opacity", "1")
    model_server.push(Reply(text="Blue."))
    regenerate.click()
    expect(_answers(page)).to_have_text(["Blue."])
    pager = page.get_by_role("form", name="Variant 2 of 2 of this answer")
    expect(pager.locator(".pager-at")).to_have_text("2/2")
    expect(pager.get_by_role("button", name="Next variant")).to_be_disabled()
    page.mouse.move(0, 0)
    page.wait_for_timeout(300)
    shot(page, "branching-variants-light")
    pager.get_by_role("button", name="Previous variant").click()
    expect(_answers(page)).to_have_text(["Red."])
    expect(page.locator(".item.assistant .pager-at")).to_have_text("1/2")
    expect(page.get_by_role("button", name="Previous variant")).to_be_disabled()
    assert same_document(page)
    assert _said(api, key)[-1] == ("assistant", "Red.")  # the head moved, not only the page
    page.reload()
    expect(_answers(page)).to_have_text(["Red."])
    expect(page.locator(".item.assistant .pager-at")).to_have_text("1/2")
    page.get_by_role("button", name="Next variant").click()
    expect(_answers(page)).to_have_text(["Blue."])
    page.emulate_media(color_scheme="dark")
    page.locator(".item.assistant").hover()  # this one with its actions shown
    page.wait_for_timeout(300)  # (their fade)
    shot(page, "branching-variants-dark")
    assert console_errors == []


def test_edit_a_message_and_send_it_as_a_new_branch(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "hello", "Hi.")
    _answered(api, model_server, key, "tell me about cats", "Cats purr.")
    open_chat(page, gateway, key)
    mine = page.locator(".item.user").nth(1)
    mine.hover()
    mine.get_by_role("button", name="Edit").click()
    box = page.get_by_label("Your message, edited")
    expect(box).to_have_value("tell me about cats")
    expect(box).to_be_focused()
    box.press("Escape")  # Esc leaves it as it was
    expect(box).to_have_count(0)
    expect(mine.locator(".bubble")).to_be_visible()
    mine.hover()
    mine.get_by_role("button", name="Edit").click()
    box.fill("tell me about dogs")
    shot(page, "branching-edit-light")
    model_server.push(Reply(text="Dogs bark."))
    box.press("Enter")
    expect(page.locator(".item.user .text")).to_have_text(["hello", "tell me about dogs"])
    expect(_answers(page)).to_have_text(["Hi.", "Dogs bark."])
    expect(page.locator(".item.user").nth(1).locator(".pager-at")).to_have_text("2/2")
    assert same_document(page)
    assert _said(api, key)[2:] == [("user", "tell me about dogs"), ("assistant", "Dogs bark.")]
    page.locator(".item.user").nth(1).get_by_role("button", name="Previous variant").click()
    expect(_answers(page)).to_have_text(["Hi.", "Cats purr."])
    assert console_errors == []


def test_fork_from_a_message_opens_a_new_chat_with_the_messages_up_to_there(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "plan a trip", "Where to?")
    _answered(api, model_server, key, "Rome", "Rome it is.")
    _answered(api, model_server, key, "and then?", "Florence.")
    open_chat(page, gateway, key)
    mine = page.locator(".item.user").nth(1)
    mine.hover()
    mine.get_by_label("More actions for what you said").click()
    mine.get_by_role("button", name="Fork from here").click()
    expect(page).not_to_have_url(f"{gateway.url}/chats/{key}")
    expect(page.locator(".item.user .text")).to_have_text(["plan a trip", "Rome"])
    expect(_answers(page)).to_have_text(["Where to?"])
    fork = page.url.rsplit("/", 1)[-1]
    assert _said(api, fork) == [("user", "plan a trip"), ("assistant", "Where to?"),
                                ("user", "Rome")]
    assert len(_said(api, key)) == 6  # the chat forked from is as it was


def test_rewind_to_an_answer_sets_the_rest_aside_and_runs_nothing(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "one", "First.")
    _answered(api, model_server, key, "two", "Second.")
    asked = len(model_server.requests)
    open_chat(page, gateway, key)
    first_answer = page.locator(".item.assistant").first
    first_answer.hover()
    first_answer.locator("summary[aria-label='More actions for this answer']").click()
    first_answer.get_by_role("button", name="Rewind to here").click()
    expect(page.locator(".item.user .text")).to_have_text(["one"])
    expect(_answers(page)).to_have_text(["First."])
    assert same_document(page)
    assert _said(api, key) == [("user", "one"), ("assistant", "First.")]
    assert len(model_server.requests) == asked  # at an answer, nothing runs


def test_the_map_rail_jumps_to_a_message(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    long = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(12))
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "m.txt", "content": "x"})]))
    model_server.push(Reply(text=long))
    assert api.wait(api.send(key, "the first question")["run_id"])["status"] == "complete"
    for n in range(2, 7):
        _answered(api, model_server, key, f"question number {n}", long)
    open_chat(page, gateway, key)
    rail = page.get_by_role("navigation", name="Chat map")
    ticks = rail.get_by_role("link")
    expect(ticks).to_have_count(6)
    first = ticks.first
    expect(first).to_have_attribute("aria-label", "1. the first question (1 tool call)")
    expect(first.locator(".dot.tool")).to_have_count(1)
    target = page.locator(".item.user").first
    expect(target).not_to_be_in_viewport()  # the chat opens at its newest line
    first.hover()  # its tooltip; the screenshot is the window, where the rail is
    page.screenshot(path=str(shot(page, "chat-map-light")))
    first.click()
    expect(target).to_be_in_viewport()
    expect(first).to_have_attribute("aria-current", "location")
    assert same_document(page)
    model_server.push(Reply(text="Seventh."))  # a new exchange: the rail grows after its turn
    api.wait(api.send(key, "a seventh")["run_id"])
    expect(ticks).to_have_count(7)


def test_the_repeat_guard_asks_before_a_regenerate_runs_a_write_again(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str]) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Wrote it."))
    assert api.wait(api.send(key, "write a.txt")["run_id"])["status"] == "complete"
    asked = len(model_server.requests)
    open_chat(page, gateway, key)
    answer = page.locator(".item.assistant")
    answer.hover()
    answer.get_by_role("button", name="Regenerate").click()
    expect(answer.locator(".regenerate .action-status")).to_contain_text("may repeat 1 step")
    expect(answer.locator(".repeat-steps li")).to_have_text(
        ["write_file a.txt: Wrote 1 byte to a.txt."])
    assert len(model_server.requests) == asked  # asked, not run
    page.mouse.move(0, 0)
    expect(answer.get_by_role("button", name="Regenerate anyway")).to_have_css("opacity", "1")
    shot(page, "branching-repeat-light")
    model_server.push(Reply(text="Again, without writing."))
    answer.get_by_role("button", name="Regenerate anyway").click()
    expect(_answers(page)).to_have_text(["Again, without writing."])
    expect(page.locator(".item.assistant .pager-at")).to_have_text("2/2")
    assert same_document(page)
    assert [e for e in console_errors if "409 (Conflict)" not in e] == []  # (the question)


def test_another_tabs_regenerate_shows_up_live(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "a question", "One answer.")
    open_chat(page, gateway, key)
    model_server.push(Reply(text="Another answer."))
    again = api.http.post(f"/api/sessions/{key}/regenerate", json={})
    assert again.status_code == 202, again.text
    expect(_answers(page)).to_have_text(["Another answer."])
    expect(page.locator(".item.assistant .pager-at")).to_have_text("2/2")
    assert same_document(page)


def test_the_controls_fit_a_phone_and_show_without_hover(
        gateway: Gateway, model_server: ScriptedModelServer, browser: Browser,
        shot: Shot) -> None:
    api = gateway.client()
    key = api.new_chat()
    _answered(api, model_server, key, "a question a phone asks, a little long " * 2, "Red.")
    model_server.push(Reply(text="Blue, said at some length so that it wraps. " * 3))
    api.wait(api.http.post(f"/api/sessions/{key}/regenerate", json={}).json()["run_id"])
    with signed_in_context(browser, gateway, viewport=PHONE, color_scheme="light", has_touch=True,
                  is_mobile=True) as page:
        open_chat(page, gateway, key)
        expect(page.get_by_role("navigation", name="Chat map")).to_be_hidden()
        regenerate = page.get_by_role("button", name="Regenerate")
        expect(regenerate).to_have_css("opacity", "1")  # no hover on touch: always shown
        expect(page.locator(".item.assistant .pager-at")).to_have_text("2/2")
        shot(page, "branching-phone-light")
        width = int(page.evaluate("document.documentElement.scrollWidth"))
        assert width <= PHONE["width"], f"the chat is {width} px wide on a 390 px phone"
        page.locator("summary[aria-label='More actions for this answer']").click()
        panel = page.get_by_role("group", name="Actions for this answer")
        expect(panel).to_be_visible()
        page.screenshot(path=str(shot(page, "branching-phone-menu-light")))  # the window
        box = panel.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]


def test_a_turn_that_said_something_before_a_tool_call_has_its_actions_on_its_last_answer(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Let me look.", tool_calls=[Call("list_files", {})]),
                      Reply(text="Nothing there."))
    assert api.wait(api.send(key, "what is here?")["run_id"])["status"] == "complete"
    open_chat(page, gateway, key)
    said, answered = page.locator(".item.assistant").first, page.locator(".item.assistant").last
    expect(said.locator(".markdown")).to_have_text("Let me look.")
    said.hover()
    expect(said.get_by_role("button", name="Regenerate")).to_be_hidden()
    answered.hover()
    expect(answered.get_by_role("button", name="Regenerate")).to_be_visible()
