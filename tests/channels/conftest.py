"""The channels' fixtures: `telegram` (a fake Telegram Bot API server), `slack` (a fake Slack)
and `matrix` (a fake Matrix homeserver), one for each test that asks (defined once in
tests/support/fixtures.py)."""

from tests.support.fixtures import (  # noqa: F401 - `matrix`, `slack`, `telegram`
    matrix_fixture,
    slack_fixture,
    telegram_fixture,
)
