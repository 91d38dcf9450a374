"""Settings → an agent's files in Chromium: reached from the agents list, a file saved from
its form is there after the redirect (said "saved"), and the page fits a phone, light and
dark (screenshots into test-artifacts/)."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Gateway

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def test_an_agents_files_are_edited_from_settings(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: Callable[[Gateway], Page], shot: Callable[[Page, str], object]) -> None:
    gateway = gateway_factory(config='[agents.poet]\nsystem_prompt = "You write poems."\n')
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/settings#agents")
    page.get_by_role("link", name="Files", exact=True).first.click()
    expect(page.get_by_role("heading", name="AGENTS.md")).to_be_visible()
    page.get_by_role("textbox", name="SOUL.md").fill("You love rhyme and short lines.")
    page.get_by_role("button", name="Save SOUL.md").click()
    expect(page.locator("#file-SOUL\\.md").get_by_role("status")).to_have_text("saved")
    assert (gateway.home / "agents" / "poet" / "SOUL.md").read_text() == (
        "You love rhyme and short lines.")
    for theme in ("light", "dark"):
        page.context.add_cookies([{"name": "hearth_theme", "value": theme,
                                   "url": gateway.url}])
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            page.goto(f"{gateway.url}/settings/agents/poet/files")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= size["width"], f"the page is {width} px wide"
            shot(page, f"agent-files{suffix}-{theme}")
