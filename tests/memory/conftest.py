"""The memory tests' fixtures: `db`, a migrated store on each engine in turn (SQLite, then
PostgreSQL) with the memory's locks installed (hearth/privacy/stores.py), as the gateway's own
store has them (SQLite's authorizer; PostgreSQL's roles, migration 0021)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth.privacy.stores import protect
from hearth.store.db import Database
from tests.support.fixtures import ENGINES, store_on


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    with store_on(request.param, tmp_path) as database:
        protect(database)
        yield database
