"""A lean start: the gateway imports only what serving needs, and `/healthz` answers before the
optional subsystems have started, saying which still are (`starting`).

The import check starts the app as `hearth gateway` does (the CLI's module, then `create_app`
and its lifespan, every optional subsystem let finish) in a fresh interpreter on a home whose
schema is current (and on a new home, whose schema a child process makes), with a model and no
channel, and lists what it imported; a planted import proves the check sees one.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from hearth.config import Config
from hearth.home import Home
from hearth.store import migrate
from hearth.store.db import Database
from hearth.web.app import create_app
from tests.gateway import TOKEN, Gateway, write_config
from tests.support.polling import until
from tests.support.store import seed_home

# what a gateway with no channel, no MCP server and no cron job never needs at its start
OPTIONAL = ("telegram", "mcp", "httpx", "rich", "pygments", "jinja2", "markdown_it",
            "croniter", "alembic", "anthropic")

START = """
import asyncio, json, sys
import hearth.cli  # the entry point of `hearth gateway`
from hearth.config import load_config
from hearth.home import Home
from hearth.web.app import create_app
from hearth.web.http import server
{plant}

async def start() -> None:
    home = Home.from_env()
    hearth.cli.migrate_apart(home)  # as `hearth gateway` does before it builds the app
    app = create_app(home, load_config(home.config_file))
    async with app.router.lifespan_context(app):
        await app.state.starting.done()
        assert app.state.starting.names() == []

asyncio.run(start())
print(json.dumps(sorted(sys.modules)))
"""


def imported_at_start(home: Path, plant: str = "") -> set[str]:
    """The top-level packages of OPTIONAL a fresh gateway imported by the end of its start."""
    env = {**os.environ, "HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN}
    done = subprocess.run([sys.executable, "-c", START.format(plant=plant)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.splitlines()[-1])
    return {name.split(".")[0] for name in modules} & set(OPTIONAL)


def current_home(home: Path) -> Path:
    """A home with a model, no channel, and its schema made (a restart's, not a first start:
    a first start runs Alembic)."""
    write_config(home, "http://127.0.0.1:9/v1")  # never called: the start builds its client
    seed_home(home)
    return home


def test_a_start_without_channels_imports_none_of_the_optional_libraries(home: Path) -> None:
    assert imported_at_start(current_home(home)) == set()


def test_a_first_start_makes_the_schema_in_a_child_and_never_imports_alembic(home: Path) -> None:
    write_config(home, "http://127.0.0.1:9/v1")  # a new home: no store yet
    assert imported_at_start(home) == set()
    db = Database(Home(home).database_url())
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == \
            migrate.head_revision()
    db.close()


def test_the_check_sees_a_planted_import(home: Path) -> None:
    current_home(home)
    assert imported_at_start(home, plant="import pygments.lexers, rich.console") == {
        "pygments", "rich"}


def test_healthz_says_what_is_still_starting_until_nothing_is(gateway: Gateway) -> None:
    def starting() -> list[str]:
        answer = httpx.get(f"{gateway.url}/healthz", timeout=10)
        assert answer.status_code == 200, answer.text
        listed = answer.json()["starting"]
        assert set(listed) <= {"models", "channels"}, listed
        return list(listed)

    until(lambda: starting() == [], what="the optional subsystems to have started")
    api = gateway.client()
    assert api.wait(api.send(api.new_chat(), "hello")["run_id"])["status"] == "complete"


def held(release: threading.Event) -> Callable[[], Coroutine[Any, Any, None]]:
    """A subsystem's start that ends once `release` is set."""
    async def start() -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)
    return start


def test_healthz_answers_while_the_models_and_channels_are_still_starting(home: Path) -> None:
    seed_home(home)
    app = create_app(Home(home), Config())
    models, channels = threading.Event(), threading.Event()
    app.state.engine.warm = held(models)  # looked up when the lifespan begins them
    app.state.channels.start = held(channels)
    with TestClient(app) as client:
        def starting() -> list[str]:
            answer = client.get("/healthz")
            assert answer.status_code == 200, answer.text
            return list(answer.json()["starting"])

        assert starting() == ["models", "channels"]
        models.set()
        until(lambda: starting() == ["channels"], what="the models to have started")
        channels.set()
        until(lambda: starting() == [], what="the channels to have started")
