"""Fixtures more than one folder of tests uses, defined once here and imported by the
conftest.py of each folder that uses them (or by a test module whose folder's conftest.py does
not), so a test asks for them by name as for any fixture: `db`, a migrated store in the test's
folder; `client`, the dashboard in process under Starlette's TestClient; `telegram`, a fake
Telegram Bot API server. Each is defined as `<name>_fixture` with `name=`, so an import of it
never shadows a test's parameter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hearth.store.db import Database
from tests.fakes.matrix_server import FakeMatrix
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.support import postgres
from tests.support.dashboard import dashboard
from tests.support.store import migrated_store


@pytest.fixture(name="db")
def db_fixture(tmp_path: Path) -> Iterator[Database]:
    """A store in the test's folder, migrated to the newest schema, closed after the test."""
    with migrated_store(tmp_path) as database:
        yield database


ENGINES = ["sqlite", "postgresql"]


@contextmanager
def store_on(engine: str, folder: Path) -> Iterator[Database]:
    """A migrated store on `engine`: a SQLite file in `folder`, or a database on this
    process's PostgreSQL cluster (tests/support/postgres.py; the test is skipped, saying why,
    where none can run). Closed when the block ends."""
    if engine == "sqlite":
        with migrated_store(folder) as database:
            yield database
        return
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    database = postgres.database()
    try:
        yield database
    finally:
        database.close()


@pytest.fixture(name="db", params=ENGINES)
def db_both_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """`db` on each engine in turn (`store_on`)."""
    with store_on(request.param, tmp_path) as database:
        yield database


@pytest.fixture(name="client")
def client_fixture(home: Path) -> Iterator[TestClient]:
    """The dashboard on the test's home with the default config, under TestClient, not signed
    in (tests/support/dashboard.py)."""
    with dashboard(home) as test_client:
        yield test_client


@pytest.fixture(name="slack")
def slack_fixture() -> Iterator[FakeSlack]:
    """A fake Slack (Web API and signed event deliveries) of the test's own
    (tests/fakes/slack_server.py)."""
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(name="matrix")
def matrix_fixture() -> Iterator[FakeMatrix]:
    """A fake Matrix homeserver of the test's own (tests/fakes/matrix_server.py)."""
    with FakeMatrix() as fake:
        yield fake


@pytest.fixture(name="telegram")
def telegram_fixture() -> Iterator[FakeTelegram]:
    """A fake Telegram Bot API server of the test's own (tests/fakes/telegram_server.py)."""
    with FakeTelegram() as fake:
        yield fake
