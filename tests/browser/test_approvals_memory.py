"""The Approvals and Memory pages in Chromium: a call waiting in a chat is allowed from
/approvals; "Always" leaves a grant listed there, and once it is revoked the next such call is
asked about again; memory is added to and edited in place from /memory; and at a phone's
width (390 px) none of /approvals, /memory, /settings and /usage scrolls sideways. Each page
is saved to test-artifacts/screenshots/ in light and dark, on a desktop and on a phone."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway, iter_texts  # noqa: E402
from tests.support.approvals import pending_in  # noqa: E402
from tests.support.browser import DESKTOP, PHONE, Shot, no_sideways_scroll, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]
def _ask(api: Api, server: ScriptedModelServer, key: str, tool: str,
         arguments: dict[str, Any]) -> str:
    """Send a message whose turn asks to call `tool`; the run's id once the call waits.
    (Only the call is scripted: the turn's answer after it is the server's default, "ok", so
    two turns waiting at once never take each other's replies.)"""
    server.push(Reply(tool_calls=[Call(tool, arguments)]))
    run_id = str(api.send(key, f"please call {tool}")["run_id"])
    pending_in(api, key)
    return run_id


def _ask_to_write(api: Api, server: ScriptedModelServer, key: str, path: str,
                  content: str = "Hello from Hearth.\n") -> str:
    return _ask(api, server, key, "write_file", {"path": path, "content": content})


def _chat(api: Api, title: str) -> str:
    key = api.new_chat(trust="ask")
    assert api.http.patch(f"/api/sessions/{key}", json={"title": title}).status_code == 200
    return key


def test_a_waiting_call_is_allowed_from_the_approvals_page(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str], shot: Shot) -> None:
    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    api = gateway.client()
    older = _chat(api, "Plan the garden")
    _ask(api, model_server, older, "edit_file",
         {"path": "garden/plan.md", "old_text": "- tomatoes\n- basil\n",
          "new_text": "- tomatoes\n- basil\n- runner beans\n"})
    key = _chat(api, "Draft the release notes")
    run_id = _ask_to_write(api, model_server, key, "notes/release.md",
                           "# Release 1.2\n\n- Approvals page\n- Memory editing\n")
    page.goto(f"{gateway.url}/approvals")
    cards = page.locator(".ask-card")
    expect(cards).to_have_count(2)
    newest = cards.first  # newest first
    expect(newest).to_contain_text("write_file")
    expect(newest.get_by_role("link", name="Draft the release notes")).to_have_attribute(
        "href", f"/chats/{key}")
    expect(newest.locator(".preview")).to_contain_text("notes/release.md")
    expect(newest.locator(".ask-meta time")).to_contain_text("asked")
    expect(page.locator(".page-nav .count")).to_have_text("2")
    shots(page, gateway, shot, "/approvals", "approvals")

    page.goto(f"{gateway.url}/approvals")
    page.locator(".ask-card").first.get_by_role("button", name="Allow once").click()
    expect(page).to_have_url(re.compile(r"/approvals\?done=allow_once$"))
    expect(page.locator(".done-notice")).to_contain_text("Allowed once")
    assert api.wait(run_id)["status"] == "complete"
    assert list(iter_texts(api.messages(key), "assistant")) == ["ok"]
    results = list(iter_texts(api.messages(key), "tool_result"))
    assert len(results) == 1 and "denied" not in results[0].lower(), results
    page.reload()
    expect(page.locator(".ask-card")).to_have_count(1)
    expect(page.locator(".ask-card").first).to_contain_text("Plan the garden")
    page.locator(".ask-card").first.get_by_role("button", name="Deny").click()
    expect(page.get_by_text("Nothing is waiting on you")).to_be_visible()
    expect(page.get_by_text("No standing grants")).to_be_visible()
    shots(page, gateway, shot, "/approvals", "approvals-empty")
    assert console_errors == []


def test_always_leaves_a_grant_and_revoking_it_asks_again(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot) -> None:
    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    api = gateway.client()
    key = _chat(api, "Tidy the notes")
    run_id = _ask_to_write(api, model_server, key, "notes/a.md")
    page.goto(f"{gateway.url}/approvals")
    page.get_by_role("button", name="Always").click()
    expect(page).to_have_url(re.compile(r"/approvals\?done=allow_always$"))
    assert api.wait(run_id)["status"] == "complete"
    grant = page.locator("#grants .grant-row")
    expect(grant).to_have_count(1)
    expect(grant).to_contain_text("write_file")
    expect(grant).to_contain_text("any target")
    expect(grant).to_contain_text("default")
    expect(grant.get_by_role("link", name="Tidy the notes")).to_have_attribute(
        "href", f"/chats/{key}")

    # covered by the grant: the next write runs without asking
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "notes/b.md",
                                                            "content": "b"})]))
    assert api.wait(api.send(key, "write b")["run_id"])["status"] == "complete"
    page.reload()
    expect(page.get_by_text("Nothing is waiting on you")).to_be_visible()
    shots(page, gateway, shot, "/approvals", "approvals-grants")

    page.goto(f"{gateway.url}/approvals")
    grant.get_by_role("button", name=re.compile("^Revoke")).click()
    expect(page).to_have_url(re.compile(r"/approvals\?done=revoked#grants$"))
    expect(page.locator(".done-notice")).to_contain_text("Revoked")
    expect(page.locator("#grants .grant-row")).to_have_count(0)
    expect(page.get_by_text("No standing grants")).to_be_visible()

    # revoked: the next such call is asked about again
    run_id = _ask_to_write(api, model_server, key, "notes/c.md")
    page.goto(f"{gateway.url}/approvals")
    card = page.locator(".ask-card")
    expect(card).to_have_count(1)
    expect(card.locator(".preview")).to_contain_text("notes/c.md")
    card.get_by_role("button", name="Deny").click()
    assert api.wait(run_id)["status"] == "complete"


def test_memory_is_added_and_edited_from_the_page(
        gateway: Gateway, signed_in: SignedIn, console_errors: list[str],
        shot: Shot) -> None:
    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    api = gateway.client()
    page.goto(f"{gateway.url}/memory")
    expect(page.get_by_text("Nothing in memory yet")).to_be_visible()
    shot(page, "memory-empty-light")

    form = page.locator("form.add-memory")
    form.get_by_label("What your agent should remember").fill("I take my tea black.")
    form.get_by_label("Kind").select_option("preference")
    form.get_by_role("button", name="Add to memory").click()
    expect(page.locator(".done-notice")).to_contain_text("Added to memory")
    item = page.locator(".memory-item").first
    expect(item.locator(".memory-text")).to_have_text("I take my tea black.")
    expect(item.locator(".memory-kind")).to_have_text("preference")

    # the same words again add nothing, and say so
    form.get_by_label("What your agent should remember").fill("I take my tea black.")
    form.get_by_role("button", name="Add to memory").click()
    expect(page.locator(".done-notice")).to_contain_text("already in memory")
    expect(page.locator(".memory-item")).to_have_count(1)

    # blank words come back as the page with the sentence, not JSON
    form.get_by_label("What your agent should remember").fill("   ")
    form.get_by_role("button", name="Add to memory").click()  # `required` does not stop spaces
    expect(form.get_by_role("alert")).to_contain_text("Write what your agent should remember")

    api.http.post("/api/memory", json={"text": "The cat is called Mochi.", "kind": "fact"})
    api.http.post("/api/memory", json={"text": "Back up the photos every Sunday evening.",
                                       "kind": "commitment"})
    page.goto(f"{gateway.url}/memory")
    tea = page.locator(".memory-item", has_text="tea")
    tea.locator("summary", has_text="Edit").click()
    editor = tea.locator("form.memory-edit-form")
    expect(editor).to_be_visible()
    expect(tea.locator(".memory-text")).to_be_hidden()  # the form takes the item's place
    editor.get_by_label(re.compile("^Words of memory item")).fill("I take my tea with milk.")
    editor.get_by_label("Kind").select_option("fact")
    shot(page, "memory-editing-light")
    editor.get_by_role("button", name=re.compile("^Save")).click()
    expect(page).to_have_url(re.compile(r"/memory\?done=saved#memory-\d+$"))
    edited = page.locator(".memory-item", has_text="with milk")
    expect(edited.locator(".memory-text")).to_have_text("I take my tea with milk.")
    expect(edited.locator(".memory-kind")).to_have_text("fact")
    assert [i["text"] for i in api.http.get("/api/memory").json()["items"]
            if "tea" in i["text"]] == ["I take my tea with milk."]

    # words another item holds: refused in the item's own form, what was typed kept
    edited.locator("summary", has_text="Edit").click()
    edited.locator("textarea").fill("The cat is called Mochi.")
    edited.get_by_role("button", name=re.compile("^Save")).click()
    refused = page.locator(".memory-item", has=page.locator("form.memory-edit-form[action]"
                                                             " .error"))
    expect(refused.get_by_role("alert")).to_contain_text("already keeps these words")
    expect(refused.locator("textarea")).to_have_value("The cat is called Mochi.")
    weekend = _chat(api, "Weekend plans")
    api.http.post("/api/memory", json={"text": "Sam is vegetarian; plan the Saturday dinner "
                                               "around that.", "kind": "fact"},
                  headers={"X-Hearth-Session": weekend})
    shots(page, gateway, shot, "/memory", "memory")
    # the refused forms above answered 422 and 409 (as pages): nothing else went wrong
    assert [e for e in console_errors if "status of 422" not in e
            and "status of 409" not in e] == []


def test_an_item_names_the_chat_it_is_filed_under(
        gateway: Gateway, signed_in: SignedIn) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = _chat(api, "Weekend plans")
    taught = api.http.post("/api/memory", json={"text": "Sam is vegetarian.", "kind": "fact"},
                           headers={"X-Hearth-Session": key})
    assert taught.status_code == 201, taught.text
    page.goto(f"{gateway.url}/memory")
    link = page.locator(".memory-item", has_text="Sam").get_by_role("link", name="Weekend plans")
    expect(link).to_have_attribute("href", f"/chats/{key}")


def test_no_page_scrolls_sideways_on_a_phone(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    long = "a-very-long-unbroken-path-" * 8
    # something on every page: a long path waiting, a grant, a turn's usage, memory items
    key = _chat(api, "A chat with a title long enough to need wrapping on a narrow phone")
    run_id = _ask_to_write(api, model_server, key, f"{long}/first.md")
    page.goto(f"{gateway.url}/approvals")
    page.get_by_role("button", name="Always").click()
    assert api.wait(run_id)["status"] == "complete"  # before the next call is scripted
    command = f"mkdir -p {long} && echo {'y' * 300} > {long}/notes.txt"
    _ask(api, model_server, key, "shell", {"command": command})
    _ask(api, model_server, _chat(api, "Edits"), "edit_file",
         {"path": f"other/{long}.md", "old_text": "x" * 300, "new_text": "z" * 300})
    api.http.post("/api/memory", json={"text": "Unbroken: " + "x" * 300, "kind": "fact"})
    api.http.post("/api/memory", json={"text": "Prefers short answers.", "kind": "preference"})
    for path in ("/approvals", "/memory", "/settings", "/usage"):
        page.set_viewport_size(PHONE)
        page.goto(f"{gateway.url}{path}")
        no_sideways_scroll(page)
        shot(page, f"{path.strip('/')}-phone-long-light")
    page.goto(f"{gateway.url}/memory")
    page.locator(".memory-item").first.locator("summary", has_text="Edit").click()
    no_sideways_scroll(page)
    shot(page, "memory-editing-phone-long-light")
