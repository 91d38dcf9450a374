"""Settings → Channels with every kind of channel set up (Telegram, Matrix, Slack, email, the
webhook), each against its fake: each listed with its state and its sentence, in light and
dark on a desktop and a phone."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.channels.test_email import email_config  # noqa: E402
from tests.channels.test_matrix import matrix_config  # noqa: E402
from tests.channels.test_slack import slack_config  # noqa: E402
from tests.fakes.mail_server import FakeRelay, free_port  # noqa: E402
from tests.fakes.matrix_server import FakeMatrix  # noqa: E402
from tests.fakes.slack_server import FakeSlack  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import Shot, shots  # noqa: E402
from tests.support.fixtures import (  # noqa: E402, F401 - the fakes
    matrix_fixture,
    slack_fixture,
    telegram_fixture,
)
from tests.support.telegram import running, telegram_config  # noqa: E402

SignedIn = Callable[[Gateway], Page]
WEBHOOK = ('[channels.webhook]\nsecret = "whsec-0123456789abcdef"\n'
           'callback_url = "http://127.0.0.1:9/hook"\n')


@pytest.fixture
def relay() -> Iterator[FakeRelay]:
    with FakeRelay() as fake:
        yield fake


def test_settings_lists_every_channel_with_its_state(
        gateway_factory: Callable[..., Gateway], telegram: FakeTelegram, matrix: FakeMatrix,
        slack: FakeSlack, relay: FakeRelay, signed_in: SignedIn, shot: Shot) -> None:
    config = "\n".join([telegram_config(telegram), matrix_config(matrix), slack_config(slack),
                        email_config(relay, free_port()), WEBHOOK])
    gateway = gateway_factory(config)
    for name in ("telegram", "matrix", "slack", "email", "webhook"):
        running(gateway.client(), name, timeout=20)
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/settings#channels")
    section = page.locator("#channels")
    for shown in ("Telegram", "Matrix", "Slack", "Email", "Webhook"):
        expect(section).to_contain_text(shown)
    expect(section).to_contain_text("Syncing as @hearth:example.org")
    expect(section).to_contain_text("Taking mail for hearth@example.org")
    expect(section.locator('[data-channel="email"] .hint')).to_have_count(0)  # it can continue
    expect(section.locator('[data-channel="matrix"] .hint')).to_contain_text(
        "Write to the bot in your direct room first")
    expect(section.locator('[data-channel="slack"] .hint')).to_have_count(0)  # owner_ids set
    shots(page, gateway, shot, "/settings#channels", "settings-channels-all",
          element="#channels")
