"""The fixtures of tests/engine/: `db`, a migrated store on each engine in turn, SQLite and
PostgreSQL (defined once in tests/support/fixtures.py)."""

from tests.support.fixtures import db_both_fixture  # noqa: F401 - `db`
