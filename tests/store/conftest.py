"""The fixtures of tests/store/: `db`, a migrated store in the test's folder (defined once in
tests/support/fixtures.py)."""

from tests.support.fixtures import db_fixture  # noqa: F401 - `db`
