"""The fixtures of tests/web/: `client`, the dashboard in process under TestClient,
`telegram`, a fake Telegram Bot API server, and `db`, a migrated store in the test's folder
(each defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import (  # noqa: F401 - the fixtures `client`, `telegram`, `db`
    client_fixture,
    db_fixture,
    telegram_fixture,
)
