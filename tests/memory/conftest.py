"""The memory tests' fixtures: `db`, a migrated store on each engine in turn (SQLite, then
PostgreSQL) with the memory's locks installed (hearth/privacy/stores.py), as the gateway's own
store has them (SQLite's authorizer; PostgreSQL's roles, migration 0021)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth.privacy.stores import protect
from hearth.store.db import Database
from tests.support import postgres
from tests.support.store import migrated_store


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """On each engine in turn (tests/support/postgres.py: skipped, saying why, where no
    PostgreSQL can run)."""
    if request.param == "sqlite":
        with migrated_store(tmp_path) as database:
            protect(database)
            yield database
        return
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    database = postgres.database()
    try:
        protect(database)
        yield database
    finally:
        database.close()

