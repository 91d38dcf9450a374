"""Apps on the dashboard, in Chromium: Settings → Apps lists each app with its permissions,
last use and state, and Revoke refuses its token at once; a chat an app started says
"Started by <app>" in the sidebar, the chat list and the chat's top bar. Screenshots on a
desktop and a 390 px phone, light and dark, into test-artifacts/."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import Shot, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]


def test_settings_list_apps_and_revoke_refuses_the_token_at_once(
        gateway: Gateway, signed_in: SignedIn, shot: Shot, console_errors: list[str]) -> None:
    api = gateway.client()
    made = {}
    for name, allow in (("notes-bot", ["read_chats", "send_messages"]),
                        ("home-assistant-integration", ["read_chats", "send_messages",
                                                        "manage_memory", "run_jobs"])):
        answer = api.http.post("/api/apps", json={"name": name, "permissions": allow})
        assert answer.status_code == 201, answer.text
        made[name] = answer.json()["token"]
    bot = gateway.client(made["notes-bot"])
    made_chat = bot.http.post("/api/sessions", json={})
    assert made_chat.status_code == 201
    key = made_chat.json()["key"]
    assert bot.http.patch(f"/api/sessions/{key}", json={"title": "Inbox digest"}).is_success

    page = signed_in(gateway)
    page.goto(f"{gateway.url}/settings#apps")
    rows = page.locator("#apps .app-row")
    expect(rows).to_have_count(2)
    notes = page.locator('#apps .app-row[data-app="notes-bot"]')
    expect(notes).to_contain_text("read_chats")
    expect(notes).to_contain_text("send_messages")
    expect(notes.locator(".app-active")).to_have_text("active")
    unused = page.locator('#apps .app-row[data-app="home-assistant-integration"]')
    expect(unused).to_contain_text("never")  # its token was never used
    shots(page, gateway, shot, "/settings#apps", "apps-settings", element="#apps")

    page.goto(f"{gateway.url}/settings#apps")
    notes.get_by_role("button", name="Revoke notes-bot").click()
    expect(page.locator(".notice.saved")).to_contain_text("The app is revoked")
    expect(notes.locator(".app-revoked")).to_contain_text("revoked")
    expect(notes.get_by_role("button")).to_have_count(0)
    assert bot.http.get("/api/sessions").status_code == 401  # at once
    page.locator("#apps").screenshot(path=str(shot(page, "apps-settings-revoked")))
    assert console_errors == []


def test_a_chat_an_app_started_says_so(
        gateway: Gateway, signed_in: SignedIn, shot: Shot) -> None:
    api = gateway.client()
    token = api.http.post("/api/apps", json={"name": "notes-bot",
                                             "permissions": ["send_messages"]}).json()["token"]
    key = gateway.client(token).http.post("/api/sessions", json={}).json()["key"]
    mine = api.new_chat()
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.locator("#app-badge")).to_have_text("Started by notes-bot")
    expect(page.locator(f'.sidebar a[href="/chats/{key}"] .app-badge')).to_have_text(
        "notes-bot")
    expect(page.locator(f'.sidebar a[href="/chats/{mine}"] .app-badge')).to_have_count(0)
    shots(page, gateway, shot, f"/chats/{key}", "apps-chat-started-by")
    page.goto(f"{gateway.url}/chats")
    expect(page.locator(".chat-row .app-badge")).to_have_text(["Started by notes-bot"])
    shots(page, gateway, shot, "/chats", "apps-chat-list")


def test_an_apps_call_says_who_asked_and_offers_no_always(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot) -> None:
    """The card of a call an app's turn asked for says so ("asked by app notes-bot"), on the
    chat's page and the Approvals page, and offers Allow once and Deny only: a standing grant
    serves the owner's own work alone."""
    api = gateway.client()
    token = api.http.post("/api/apps", json={"name": "notes-bot", "permissions": [
        "send_messages", "read_chats"]}).json()["token"]
    app = gateway.client(token)
    key = app.http.post("/api/sessions", json={}).json()["key"]
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "notes/app.md",
                                                             "content": "from the app"})]),
                      Reply(text="done"))
    run = app.send(key, "write the note")["run_id"]
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/chats/{key}")
    card = page.locator("form.approval")
    expect(card.locator(".asked-by")).to_have_text("asked by app notes-bot", timeout=15000)
    expect(card.locator('button[value="allow_always"]')).to_have_count(0)
    shots(page, gateway, shot, f"/chats/{key}", "apps-approval-asked-by", element="form.approval")
    page.goto(f"{gateway.url}/approvals")
    expect(page.locator(".ask-card .asked-by")).to_have_text("asked by app notes-bot")
    expect(page.locator(".ask-card")).to_contain_text("serves only your own work")
    shots(page, gateway, shot, "/approvals", "apps-approvals-page-asked-by")
    page.goto(f"{gateway.url}/chats/{key}")
    page.locator('form.approval button[value="deny"]').click()
    assert api.wait(run)["status"] == "complete"
