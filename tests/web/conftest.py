"""The fixtures of tests/web/: `client`, the dashboard in process under TestClient, and
`telegram`, a fake Telegram Bot API server (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import (  # noqa: F401 - the fixtures `client` and `telegram`
    client_fixture,
    telegram_fixture,
)
