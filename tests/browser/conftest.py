"""Real-browser fixtures: Playwright (Python) driving Debian's headless Chromium.

Nothing downloads a browser: Chromium is Debian's `chromium` (`.ci/run` installs it), launched
through `executable_path`. Without it, or without the `playwright` package, every browser test
skips with the reason. Each test gets a fresh browser context (no cookies carried over) against
its own gateway subprocess (`gateway` / `gateway_factory` from `tests/conftest.py`).

Fixtures:
- `browser` (module): the Chromium `Browser`. Never session-scoped: while Playwright's sync
  API runs, the main thread has a running asyncio loop, so `asyncio.run()` in later tests fails.
- `page` (function): a `Page` in a fresh context, default timeouts `TIMEOUT_MS`.
- `console_errors` (function): a live list of the page's console errors and uncaught script
  errors (a CSP violation is a console error), each `console: <text> [<url>]` or
  `pageerror: <error>`; the browser's own /favicon.ico request is left out.
- `signed_in` (function): `signed_in(gateway) -> Page` opens `/login` on `page`, types the
  token and submits; returns `page` on the front page (a new chat), its composer ready.
- `shot` (function): `shot(page, name) -> Path` saves a full-page screenshot to
  `test-artifacts/screenshots/<name>.png` under the repository root.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway import Gateway

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - the skip below says why
    sync_playwright = None  # type: ignore[assignment]
    Browser = Page = Any  # type: ignore[assignment,misc]

TIMEOUT_MS = 10_000  # a failure fails in seconds, not a CI hang
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)


@pytest.fixture(scope="module")  # not longer: a running Playwright holds an asyncio loop in the
def browser() -> Iterator[Browser]:  # main thread, and other tests' asyncio.run() would fail
    if sync_playwright is None:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    executable = chromium_path()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        # As root Chromium runs only without its sandbox (Playwright's default, said outright).
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        # a microphone that plays a tone, granted without asking (the composer's recording)
        args += ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]
        launched = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=args, timeout=30_000)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def console_errors(page: Page) -> list[str]:
    errors: list[str] = []

    def on_console(message: Any) -> None:
        where = message.location.get("url", "")
        if message.type != "error" or where.endswith("/favicon.ico"):
            return  # the browser's own favicon request is not the page's doing
        errors.append(f"console: {message.text} [{where}]")

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    return errors


@pytest.fixture
def signed_in(page: Page) -> Callable[[Gateway], Page]:
    from tests.support.browser import sign_in

    return lambda gateway: sign_in(page, gateway)


@pytest.fixture
def shot() -> Callable[[Page, str], Path]:
    def save(page: Page, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
