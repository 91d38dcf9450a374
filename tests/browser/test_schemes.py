"""Readable in light and dark: the chat page's text, muted text, links and buttons keep a
contrast of at least 4.5:1 (WCAG AA) against what is behind them, in either color scheme."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Browser, expect  # noqa: E402

from tests.browser.conftest import TIMEOUT_MS  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway  # noqa: E402

# The contrast of each checked element's text against the first opaque background behind it.
CONTRASTS = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const behind = (el) => { for (; el; el = el.parentElement) {
    const c = rgb(getComputedStyle(el).backgroundColor); if (c.length < 4 || c[3] > 0) return c; }
    return [255, 255, 255]; };
  const out = {};
  for (const sel of ["main p", ".item.user .text", ".markdown p", ".turn-details summary",
                     ".hint", ".stamp", ".chat-link", ".group-label", ".composer textarea",
                     "nav a", "button", ".item.notice .sentence"]) {
    const el = document.querySelector(sel); if (!el) { out[sel] = null; continue; }
    const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(behind(el))];
    out[sel] = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }
  return out;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_chat_page_is_readable_in_light_and_dark(
        browser: Browser, gateway: Gateway, model_server: ScriptedModelServer, scheme: str,
        shot: Callable[..., Path]) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="A plain answer."), Reply(status=400))
    api.wait(api.send(key, "first")["run_id"])
    api.wait(api.send(key, "second")["run_id"])  # ends on a notice with Retry
    context = browser.new_context(color_scheme=scheme)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{gateway.url}/login")
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{gateway.url}/chats/{key}")
        expect(page.locator(".item.notice")).to_have_count(1)
        contrasts = page.evaluate(CONTRASTS)
        shot(page, f"chat-{scheme}")
    finally:
        context.close()
    low = {sel: c if c is None else round(c, 2) for sel, c in contrasts.items()
           if c is None or c < 4.5}
    assert not low, f"{scheme}: too little contrast (or missing) for {low}"
