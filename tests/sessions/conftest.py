"""The fixtures of tests/sessions/: `db`, a migrated store in the test's folder (defined once in
tests/support/fixtures.py)."""

from tests.support.fixtures import db  # noqa: F401 - a fixture, used by name
