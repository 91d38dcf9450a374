"""The channels' fixtures: `telegram`, a fake Telegram Bot API server for each test that asks for
one (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import telegram_fixture  # noqa: F401 - `telegram`
