"""The axe-core rules (vendored in tests/browser/vendor, run in Chromium) on the chat page, Settings
and Approvals, in both themes: no serious or critical violation. And a focus ring on whatever
the keyboard reaches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Browser, Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import set_theme, signed_in_context  # noqa: E402

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
SERIOUS = ("serious", "critical")


@pytest.fixture
def checked(browser: Browser) -> Iterator[Callable[[Gateway], Page]]:
    """A signed-in page whose context lets axe's script in (the pages' CSP refuses any script
    not the gateway's own: `bypass_csp` is for the check alone)."""
    with ExitStack() as contexts:
        yield lambda gateway: contexts.enter_context(
            signed_in_context(browser, gateway, bypass_csp=True))


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's serious and critical violations on the page as it is drawn now."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => (await axe.run(document, {
        resultTypes: ["violations"]})).violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" "))}))""")
    return [v for v in found if v["impact"] in SERIOUS]


def _chat_with_a_waiting_call(gateway: Gateway, server: ScriptedModelServer) -> str:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    server.push(Reply(text="Here is a plan:\n\n```python\nprint('hi')\n```"))
    api.wait(api.send(key, "plan it")["run_id"])
    server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                Reply(text="Written."))
    api.send(key, "write a.txt")
    return key


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_chat_settings_and_approvals_pages_pass_axe(
        gateway: Gateway, model_server: ScriptedModelServer,
        checked: Callable[[Gateway], Page], theme: str) -> None:
    page = checked(gateway)
    set_theme(page, gateway, theme)
    key = _chat_with_a_waiting_call(gateway, model_server)
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    expect(page.locator(".code-block")).to_have_count(1)
    assert violations(page) == []
    page.locator(".chat-menu > summary").click()  # the menu open, too
    assert violations(page) == []
    for section in ("models", "agents", "channels", "apps", "jobs", "sandbox", "account"):
        page.goto(f"{gateway.url}/settings#{section}")
        page.reload()
        expect(page.locator(f"#{section}")).to_be_visible()
        assert violations(page) == [], section
    page.goto(f"{gateway.url}/approvals")
    expect(page.get_by_role("button", name="Allow once").first).to_be_visible()
    assert violations(page) == []


def test_axe_finds_a_planted_violation(
        gateway: Gateway, checked: Callable[[Gateway], Page]) -> None:
    """The positive control: an unlabelled field and a button with no name are found."""
    page = checked(gateway)
    page.goto(f"{gateway.url}/settings")
    page.evaluate("""() => {
        const main = document.querySelector("main");
        main.append(document.createElement("input"), document.createElement("button"));
    }""")
    assert {v["id"] for v in violations(page)} >= {"label", "button-name"}


def test_the_keyboard_focus_is_always_drawn(
        gateway: Gateway, model_server: ScriptedModelServer,
        checked: Callable[[Gateway], Page]) -> None:
    """Tab through the chat page: every element that takes the focus shows a ring (an outline
    or a box shadow), never nothing."""
    page = checked(gateway)
    key = _chat_with_a_waiting_call(gateway, model_server)
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    unringed = []
    for _ in range(40):
        page.keyboard.press("Tab")
        ring = page.evaluate("""() => {
            const e = document.activeElement;
            if (!e || e === document.body) return null;
            const ringed = (el) => { const s = getComputedStyle(el);
                return (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0)
                    || (s.boxShadow && s.boxShadow !== "none"); };
            // its own ring, or its box's (a composer draws one around its text box)
            let drawn = ringed(e);
            let up = e.parentElement;
            for (let n = 0; !drawn && up && n < 3; n++, up = up.parentElement) {
                drawn = up.matches(":focus-within") && ringed(up);
            }
            return [e.outerHTML.slice(0, 80), drawn];
        }""")
        if ring is not None and not ring[1]:
            unringed.append(ring[0])
    assert unringed == []
