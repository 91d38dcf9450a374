"""The fixtures of tests/sessions/: `db`, a migrated store in the test's folder, and `client`, the
dashboard in process under TestClient (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import client, db  # noqa: F401 - fixtures, used by name
