"""The channels' fixtures: `telegram`, a fake Telegram Bot API server, and `slack`, a fake Slack,
for each test that asks for one (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import (  # noqa: F401 - `slack`, `telegram`
    slack_fixture,
    telegram_fixture,
)
