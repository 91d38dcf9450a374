"""The memory tests' fixtures: `db`, a migrated store in the test's folder with the memory's
locks installed (hearth/privacy/stores.py), as the gateway's own store has them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth.privacy.stores import protect
from hearth.store.db import Database
from tests.support.store import migrated_store


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with migrated_store(tmp_path) as database:
        protect(database)
        yield database
