"""The sidebar in Chromium: each chat's ⋯ menu (Rename in place, Pin, Move to folder, Tags,
Archive, Delete after a dialog), reached by the mouse and by the keyboard (Enter opens it at its
first item, the arrows move, Esc closes it back to its button), each action checked against
the API; a chat dragged onto a folder moved into it; and Incognito and Temporary, each started
in one click from the sidebar and from the new-chat page, with their own banners. Screenshots
in light and dark, on a desktop and a phone, of the menu open and of each private banner."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Locator, Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway  # noqa: E402
from tests.support.browser import DESKTOP, PHONE, set_theme  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]


def _chat(api: Api, model_server: ScriptedModelServer, title: str) -> str:
    """A chat of one exchange, titled `title` by its title chore (waited for)."""
    key = api.new_chat()
    model_server.push(Reply(text="Sure."))
    model_server.push_chore(Reply(text=title), kind="title")
    api.wait(api.send(key, f"Tell me about {title.lower()}")["run_id"])
    deadline = time.monotonic() + 10
    while _session(api, key)["title"] != title:
        assert time.monotonic() < deadline, f"{key} was never titled {title!r}"
        time.sleep(0.05)
    return key


def _session(api: Api, key: str) -> dict[str, Any]:
    answer = api.http.get(f"/api/sessions/{key}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["session"])


def _item(page: Page, key: str) -> Locator:
    return page.locator(f".chat-nav .chat-item[data-key='{key}']")


def _menu_of(page: Page, key: str) -> Locator:
    """Open the ⋯ menu of chat `key` with a click; the menu (role=menu)."""
    _item(page, key).hover()
    _item(page, key).locator(".chat-more").click()
    menu = page.get_by_role("menu")
    expect(menu).to_be_visible()
    return menu


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_each_action_of_a_chats_menu_does_what_it_says(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str]) -> None:
    api = gateway.client()
    filed = _chat(api, model_server, "Garden plans")
    assert api.http.patch(f"/api/sessions/{filed}", json={"folder": "Work"}).status_code == 200
    chat = _chat(api, model_server, "Bread baking")
    doomed = _chat(api, model_server, "Old notes")
    page = signed_in(gateway)

    menu = _menu_of(page, chat)  # Rename: in place, Enter keeps it
    expect(menu.get_by_role("menuitem")).to_have_text(
        ["Rename", "Pin", "Move to folder…", "Tags…", "Archive", "Delete…"])
    menu.get_by_role("menuitem", name="Rename").click()
    field = _item(page, chat).get_by_label("Chat title")
    expect(field).to_be_focused()
    field.fill("Sourdough")
    field.press("Enter")
    expect(_item(page, chat).locator(".chat-link-name")).to_have_text("Sourdough")
    assert _session(api, chat)["title"] == "Sourdough"

    _menu_of(page, chat).get_by_role("menuitem", name="Pin").click()  # Pin: under Pinned
    expect(page.locator(".chat-nav h2.group-label").first).to_have_text("Pinned")
    expect(page.locator(".chat-nav h2 + .chat-links").first.locator(".chat-item")
           ).to_have_attribute("data-key", chat)
    assert _session(api, chat)["pinned"] is True
    expect(_menu_of(page, chat).get_by_role("menuitem", name="Unpin")).to_be_visible()
    page.keyboard.press("Escape")

    _menu_of(page, chat).get_by_role("menuitem", name="Move to folder…").click()
    sheet = page.get_by_role("dialog", name="Move to a folder")
    expect(sheet).to_be_visible()
    sheet.get_by_role("button", name="Work").click()  # an existing folder, in one click
    expect(sheet).to_be_hidden()
    assert _session(api, chat)["folder"] == "Work"
    expect(page.locator(".folder-link[data-drop-folder='Work'] .count-soft")).to_have_text("2")
    _menu_of(page, chat).get_by_role("menuitem", name="Move to folder…").click()
    sheet.get_by_label("A new folder").fill("Kitchen")  # a new one
    sheet.get_by_role("button", name="Move", exact=True).click()
    expect(sheet).to_be_hidden()
    assert _session(api, chat)["folder"] == "Kitchen"

    _menu_of(page, chat).get_by_role("menuitem", name="Tags…").click()
    tags = page.get_by_role("dialog", name="Tags")
    tags.get_by_label("Tags, separated by commas").fill("Recipes, weekend")
    tags.get_by_role("button", name="Save").click()
    expect(tags).to_be_hidden()
    assert _session(api, chat)["tags"] == ["recipes", "weekend"]

    _menu_of(page, chat).get_by_role("menuitem", name="Archive").click()
    expect(_item(page, chat)).to_have_count(0)
    assert _session(api, chat)["archived"] is True

    _menu_of(page, doomed).get_by_role("menuitem", name="Delete…").click()
    confirm = page.get_by_role("dialog", name="Delete this chat?")
    expect(confirm).to_contain_text("Old notes")
    confirm.get_by_role("button", name="Cancel").click()  # Cancel deletes nothing
    assert api.http.get(f"/api/sessions/{doomed}").status_code == 200
    _menu_of(page, doomed).get_by_role("menuitem", name="Delete…").click()
    confirm.get_by_role("button", name="Delete", exact=True).click()
    expect(_item(page, doomed)).to_have_count(0)
    assert api.http.get(f"/api/sessions/{doomed}").status_code == 404
    assert console_errors == []


def test_the_menu_works_from_the_keyboard(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    api = gateway.client()
    chat = _chat(api, model_server, "Keyboard only")
    page = signed_in(gateway)
    button = _item(page, chat).locator(".chat-more")
    expect(button).to_have_attribute("aria-haspopup", "menu")
    button.focus()
    page.keyboard.press("Enter")
    menu = page.get_by_role("menu")
    expect(menu).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("End")
    expect(menu.get_by_role("menuitem", name="Delete…")).to_be_focused()
    page.keyboard.press("ArrowDown")  # round to the first
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(button).to_be_focused()
    expect(button).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # Pin, from the keyboard
    _eventually(lambda: _session(api, chat)["pinned"] is True, "never pinned")
    page.mouse.click(900, 400)  # a click outside closes an open menu
    button = _item(page, chat).locator(".chat-more")
    button.click()
    expect(page.get_by_role("menu")).to_be_visible()
    page.mouse.click(900, 400)
    expect(page.get_by_role("menu")).to_be_hidden()


def test_a_restricted_chats_menu_has_only_rename_and_delete(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn) -> None:
    api = gateway.client()
    hidden = api.new_chat(memory_mode="incognito")
    model_server.push(Reply(text="ok"))
    api.wait(api.send(hidden, "A quiet question")["run_id"])
    page = signed_in(gateway)
    item = _item(page, hidden)  # shown by its first words, its kind's mark beside them
    expect(item.locator(".chat-link-name")).to_have_text("A quiet question")
    expect(item.locator(".chat-link.incognito .mode-mark")).to_be_visible()
    menu = _menu_of(page, hidden)
    expect(menu.get_by_role("menuitem")).to_have_text(["Rename", "Delete…"])


def test_a_chat_dragged_onto_a_folder_moves_into_it(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str]) -> None:
    api = gateway.client()
    filed = _chat(api, model_server, "Tax forms")
    assert api.http.patch(f"/api/sessions/{filed}", json={"folder": "Home"}).status_code == 200
    loose = _chat(api, model_server, "Boiler repair")
    page = signed_in(gateway)
    folder = page.locator(".folder-link[data-drop-folder='Home']")
    expect(folder.locator(".count-soft")).to_have_text("1")
    _item(page, loose).locator(".chat-link").drag_to(folder)
    expect(folder.locator(".count-soft")).to_have_text("2")
    assert _session(api, loose)["folder"] == "Home"
    expect(page.locator("[data-toast]")).to_have_text("Moved to Home.")
    assert console_errors == []


def _opened_menu(page: Page, key: str) -> None:
    """The menu of `key` open, the phone's drawer opened first (for the screenshots)."""
    if page.viewport_size == PHONE:
        page.locator("[data-open-drawer]").click()
        expect(page.locator("html[data-drawer=open]")).to_have_count(1)
        page.wait_for_timeout(300)  # the drawer's slide
    _menu_of(page, key)


def test_screenshots_of_the_sidebar_with_a_menu_open(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot) -> None:
    api = gateway.client()
    filed = _chat(api, model_server, "Quarterly report")
    assert api.http.patch(f"/api/sessions/{filed}",
                          json={"folder": "Work", "pinned": True}).status_code == 200
    chat = _chat(api, model_server, "Lentil soup")
    _chat(api, model_server, "Trip to Lisbon")
    for mode, words in (("incognito", "Salary question"), ("temporary", "Quick sum")):
        key = api.new_chat(memory_mode=mode)
        model_server.push(Reply(text="ok"))
        api.wait(api.send(key, words)["run_id"])
    page = signed_in(gateway)
    for theme in ("light", "dark"):
        set_theme(page, gateway, theme)
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            page.goto(f"{gateway.url}/chats/{chat}")
            _opened_menu(page, chat)
            shot(page, f"sidebar-menu{suffix}-{theme}")
    page.set_viewport_size(DESKTOP)
    set_theme(page, gateway, "light")
    page.goto(f"{gateway.url}/chats/{chat}")
    _menu_of(page, chat).get_by_role("menuitem", name="Move to folder…").click()
    shot(page, "sidebar-move-to-folder")


@pytest.mark.parametrize(("mode", "promise", "other"), [
    ("incognito", "Kept, never learned from.", "temporary"),
    ("temporary", "Gone when you leave.", "incognito"),
])
def test_a_private_chat_starts_in_one_click_with_its_own_banner(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        shot: Shot, console_errors: list[str], mode: str, promise: str, other: str) -> None:
    api = gateway.client()
    page = signed_in(gateway)
    page.locator(f".sidebar [data-private-start={mode}]").click()  # one click, from the sidebar
    expect(page).to_have_url(f"{gateway.url}/?mode={mode}")
    expect(page.locator(f"input[name=memory_mode][value={mode}]")).to_be_checked()
    intro = page.locator(f".private-intro.{mode}")
    expect(intro).to_be_visible()
    expect(intro).to_contain_text(promise)
    expect(page.locator(f".private-intro.{other}")).to_be_hidden()
    expect(page.locator(".start-greeting")).to_be_hidden()
    model_server.push(Reply(text="Noted."))
    page.locator("#text").fill(f"A {mode} question")
    page.keyboard.press("Enter")
    banner = page.locator(f".private-banner.{mode}")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text(promise)
    expect(page.locator(f".private-banner.{other}")).to_have_count(0)
    key = page.url.rsplit("/", 1)[1]
    assert _session(api, key)["memory_mode"] == mode
    for theme in ("light", "dark"):
        set_theme(page, gateway, theme)
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            page.goto(f"{gateway.url}/chats/{key}")
            expect(banner).to_be_visible()
            shot(page, f"private-banner-{mode}{suffix}-{theme}")
    page.set_viewport_size(DESKTOP)
    set_theme(page, gateway, "light")

    page.goto(f"{gateway.url}/")  # and one click on the new-chat page
    expect(page.locator(".start-greeting")).to_be_visible()
    page.locator(f".mode-choice label.{mode}").click()
    expect(page.locator(f".private-intro.{mode}")).to_be_visible()
    expect(page.locator(".start-greeting")).to_be_hidden()
    shot(page, f"start-{mode}")
    model_server.push(Reply(text="Noted again."))
    page.locator("#text").fill("Another one")
    page.keyboard.press("Enter")
    expect(page.locator(f".private-banner.{mode}")).to_be_visible()
    second = page.url.rsplit("/", 1)[1]
    assert second != key and _session(api, second)["memory_mode"] == mode
    assert console_errors == []
