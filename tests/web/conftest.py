"""The fixtures of tests/web/: `client`, the dashboard in process under TestClient (defined once
in tests/support/fixtures.py)."""

from tests.support.fixtures import client  # noqa: F401 - a fixture, used by name
