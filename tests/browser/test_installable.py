"""The dashboard as an app you install (issue 25): a manifest Chromium accepts, icons at 192
and 512 px, a service worker that keeps the gateway's own files and never a page or a chat
(an Incognito chat's words are read for in every cached byte), an offline page, and
notifications that say what happened, never what was said, only once turned on."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import open_chat  # noqa: E402

Shot = Callable[[Page, str], Path]
SECRET = "the-heron-nests-by-the-third-willow"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _ready(page: Page) -> None:
    """Until the service worker controls the page (a reload after its first install)."""
    page.evaluate("navigator.serviceWorker.ready")
    if not page.evaluate("Boolean(navigator.serviceWorker.controller)"):
        page.reload()
    assert page.evaluate("Boolean(navigator.serviceWorker.controller)")


def test_chromium_finds_the_dashboard_installable(
        gateway: Gateway, signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    _ready(page)
    cdp = page.context.new_cdp_session(page)
    errors = cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
    # a test's browser context is an incognito one, which Chromium never installs from; the
    # page itself must give no other reason
    assert [e["errorId"] for e in errors if e["errorId"] != "in-incognito"] == [], errors
    manifest = gateway.client().http.get("/static/manifest.webmanifest")
    assert manifest.headers["content-type"].startswith("application/manifest+json")
    found = manifest.json()
    assert (found["display"], found["start_url"], found["name"]) == ("standalone", "/", "Hearth")
    sizes = {}
    for icon in found["icons"]:
        if icon["type"] == "image/png":
            data = gateway.client().http.get(icon["src"]).content
            sizes[icon["sizes"]] = _png_size(data)
    assert sizes["192x192"] == (192, 192) and sizes["512x512"] == (512, 512)


def test_the_service_worker_keeps_the_shell_and_nothing_of_a_chat(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page]
        ) -> None:
    page = signed_in(gateway)
    _ready(page)
    api = gateway.client()
    key = api.new_chat(memory_mode="incognito")
    model_server.push(Reply(text=f"Noted: {SECRET}."))
    page.goto(f"{gateway.url}/chats/{key}")
    page.get_by_label("Message").fill(f"remember {SECRET}")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".item.assistant .markdown")).to_contain_text(SECRET)
    page.reload()  # the chat's page again, through the worker
    expect(page.locator(".item.assistant .markdown")).to_contain_text(SECRET)
    page.goto(f"{gateway.url}/settings")
    kept = page.evaluate("""async () => {
        const out = [];
        for (const name of await caches.keys()) {
            const cache = await caches.open(name);
            for (const request of await cache.keys()) {
                const body = await (await cache.match(request)).text();
                out.push([new URL(request.url).pathname, body]);
            }
        }
        return out;
    }""")
    paths = [path for path, _ in kept]
    assert "/static/offline.html" in paths and "/static/hearth.css" in paths  # the shell
    assert all(path.startswith("/static/") for path in paths), paths
    assert not any(SECRET in body or key in body for _, body in kept)
    page.context.set_offline(True)
    try:
        page.goto(f"{gateway.url}/chats/{key}")
        expect(page.get_by_role("heading", name="Hearth is not reachable")).to_be_visible()
        assert SECRET not in page.content()
    finally:
        page.context.set_offline(False)


NOTICES = """
window.__notices = [];
window.__hidden = false;
class Recorded { constructor(title, options) { window.__notices.push([title, options.body]); }
                 static permission = "granted";
                 static requestPermission() { return Promise.resolve("granted"); }
                 close() {} }
window.Notification = Recorded;
Object.defineProperty(document, "visibilityState",
                      { get: () => (window.__hidden ? "hidden" : "visible") });
"""


def test_notifications_say_what_happened_only_once_turned_on(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    page.add_init_script(NOTICES)  # the browser's Notification API, recorded
    api = gateway.client()
    key = api.new_chat()
    open_chat(page, gateway, key)
    page.evaluate("window.__hidden = true")  # the tab in the background
    model_server.push(Reply(text=f"Here: {SECRET}"))
    api.wait(api.send(key, "first")["run_id"])
    expect(page.locator(".item.assistant .markdown")).to_contain_text(SECRET)
    assert page.evaluate("window.__notices") == []  # off by default
    page.goto(f"{gateway.url}/settings#notifications")
    page.get_by_role("button", name="Turn on notifications").click()
    expect(page.get_by_role("button", name="Turn off notifications")).to_be_visible()
    expect(page.locator("[data-notify-state]")).to_have_text("On in this browser.")
    shot(page, "settings-notifications")
    open_chat(page, gateway, key)
    assert page.evaluate("window.__notices") == []  # the replay on connect says nothing
    page.evaluate("window.__hidden = true")
    model_server.push(Reply(text=f"Again: {SECRET}"))
    api.wait(api.send(key, "second")["run_id"])
    expect(page.locator(".item.assistant .markdown").last).to_contain_text("Again")
    notices = page.evaluate("window.__notices")
    assert notices == [["Hearth", "The answer is ready."]]
    assert SECRET not in str(notices)
    page.evaluate("window.__hidden = false")  # in front: nothing more is shown
    model_server.push(Reply(text="In front."))
    api.wait(api.send(key, "third")["run_id"])
    expect(page.locator(".item.assistant .markdown").last).to_have_text("In front.")
    assert len(page.evaluate("window.__notices")) == 1
