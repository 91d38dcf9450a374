"""The fixtures of tests/sessions/: `db`, a migrated store on each engine in turn (SQLite, then
PostgreSQL), and `client`, the dashboard in process under TestClient (defined once in
tests/support/fixtures.py)."""

from tests.support.fixtures import client_fixture, db_both_fixture  # noqa: F401 - `client`, `db`
