"""The fixtures of tests/sessions/: `db`, a migrated store in the test's folder, and `client`, the
dashboard in process under TestClient (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import client_fixture, db_fixture  # noqa: F401 - `client`, `db`
