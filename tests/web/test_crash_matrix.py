"""The crash matrix: every crash point × three scenarios × both engines (SQLite, and
PostgreSQL on the tests' own cluster), with a real `os._exit` in a real gateway subprocess,
then a restart. After each: no acknowledged message lost, no answer
duplicated, no side effect repeated, every run ended with a sentence, the chat still answers.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth.faults import EXIT_CODE, POINTS
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support import postgres
from tests.support.fixtures import ENGINES

pytestmark = pytest.mark.process_gateway  # a real os._exit at each crash point, then a restart

SCENARIOS = ("plain", "write", "queued")
CHANNEL_POINTS = {"channel_admitted", "delivery_sent"}  # tests/channels/test_telegram_crash.py
COMMON = {"admitted", "run_start", "mid_stream", "answer_persisted"}
FIRES = {  # the points each scenario passes: the process must die at exactly these
    "plain": COMMON,
    "write": COMMON | {"tools_requested", "tool_ran", "tool_recorded"},
    "queued": COMMON | {"queued"},
}


def _script(scenario: str, server: ScriptedModelServer) -> threading.Event | None:
    if scenario == "plain":
        server.push(Reply(text="The answer is forty-two.", chunks=4, delay=0.05))
        return None
    if scenario == "write":
        server.push(
            Reply(tool_calls=[
                Call("write_file", {"path": "notes.txt", "content": "hello"}),
                Call("shell", {"command": "echo w >> writes.log"}),
            ]),
            Reply(text="Wrote it.", chunks=2, delay=0.05),
        )
        return None
    release = threading.Event()
    server.push(Reply(text="First answer.", chunks=3, delay=0.05, hold=release))
    return release


def _send(api: Api, key: str, text: str, sent: list[str], acked: list[str]) -> str | None:
    """Send; a crash may cut the request off. Remember what was acknowledged."""
    sent.append(text)
    try:
        answer = api.http.post(f"/api/sessions/{key}/messages",
                               json={"text": text, "client_message_id": f"id-{text}"})
    except httpx.HTTPError:
        return None
    assert answer.status_code == 202, answer.text
    acked.append(text)
    return str(answer.json()["run_id"])


def _drive(gateway: Gateway, server: ScriptedModelServer, scenario: str
           ) -> tuple[str, list[str], list[str]]:
    api = gateway.client()
    key = api.new_chat()
    release = _script(scenario, server)
    sent: list[str] = []
    acked: list[str] = []
    _send(api, key, "question one", sent, acked)
    if release is not None:
        _until_asked_or_dead(gateway, server)
        for text in ("question two", "question three"):
            if gateway.proc is not None and gateway.proc.poll() is None:
                _send(api, key, text, sent, acked)
        release.set()
    _until_dead_or_idle(gateway, api, key)
    return key, sent, acked


def _until_asked_or_dead(gateway: Gateway, server: ScriptedModelServer,
                         timeout: float = 10) -> None:
    """Until the model is asked for the first answer, or the gateway died before it was (a
    crash at `admitted` or `run_start`): no use waiting out the timeout for a dead process."""
    assert gateway.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and gateway.proc.poll() is None:
        if server.wait_for_requests(1, timeout=0.05):
            return


def _until_dead_or_idle(gateway: Gateway, api: Api, key: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    assert gateway.proc is not None
    while time.monotonic() < deadline:
        if gateway.proc.poll() is not None:
            return
        try:
            if not api.http.get(f"/api/sessions/{key}", params={"limit": 1}).json()["running"]:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("the gateway neither died nor went idle")


def _idle(api: Api, key: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.http.get(f"/api/sessions/{key}", params={"limit": 1000}).json()
        if not body["running"]:
            return dict(body)
        time.sleep(0.1)
    raise AssertionError("the chat did not become idle after the restart")


def _check(api: Api, key: str, home: Path, sent: list[str], acked: list[str]) -> None:
    messages = _idle(api, key)["messages"]
    users = Counter(m["text"] for m in messages if m["kind"] == "user")
    for text in acked:
        assert users[text] == 1, f"acknowledged message {text!r} seen {users[text]} times"
    assert all(count == 1 for count in users.values()), users
    assert set(users) <= set(sent)
    finals = Counter(m["run_id"] for m in messages
                     if m["kind"] == "assistant" and "turn_telemetry" in m["meta"]
                     and not m["meta"].get("partial"))
    assert all(count == 1 for count in finals.values()), f"an answer was duplicated: {finals}"
    log = home / "workspace" / "writes.log"
    assert not log.exists() or log.read_text().count("w") <= 1, "a side effect was repeated"
    notes = home / "workspace" / "notes.txt"
    assert not notes.exists() or notes.read_text() == "hello"
    for run_id in {m["run_id"] for m in messages if m["run_id"]}:
        run = api.http.get(f"/api/runs/{run_id}").json()
        assert run["status"] in ("complete", "error", "stopped", "abandoned"), run
        assert run["sentence"], run
    calls = [m for m in messages if m["kind"] == "tool_call"]
    answered = [m for m in messages if m["kind"] == "tool_result"]
    assert sorted(m["content"]["call_id"] for m in calls) == sorted(
        m["content"]["call_id"] for m in answered), "a tool call was left without a result"


def _dies_unless_it_gives_up(gateway: Gateway, run_id: str, timeout: float = 20) -> bool:
    """Does this boot die (within `timeout`)? One that does not is serving, with `run_id`
    abandoned: recovery gives a run up before the gateway serves, so it cannot run it later."""
    assert gateway.proc is not None
    api = gateway.client()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if gateway.proc.poll() is not None:
                return True
            try:
                status = api.http.get(f"/api/runs/{run_id}", timeout=1).json().get("status")
            except httpx.HTTPError:
                status = None
            if status == "abandoned":
                return gateway.proc.poll() is not None
            time.sleep(0.05)
    finally:
        api.http.close()
    raise AssertionError(f"the boot neither died nor gave the run up:\n{gateway.output()}")


def _database(engine: str) -> dict[str, str]:
    """The gateway's environment for `engine`: its home's SQLite file, or a new database on
    the tests' PostgreSQL cluster (skipped, saying why, where none can run)."""
    if engine == "sqlite":
        return {}
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    store = postgres.database()
    store.close()
    return {"HEARTH_DATABASE_URL": store.url}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("point", sorted(set(POINTS) - CHANNEL_POINTS))
def test_crash_then_restart_keeps_every_promise(
        point: str, scenario: str, engine: str, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    database = _database(engine)
    gateway = gateway_factory(env={"HEARTH_CRASH_AT": point, **database})
    key, sent, acked = _drive(gateway, model_server, scenario)
    assert gateway.proc is not None
    died = gateway.proc.poll() is not None
    assert died == (point in FIRES[scenario]), gateway.output()
    if died:
        assert gateway.proc.returncode == EXIT_CODE, gateway.output()
    gateway.kill()  # a point this scenario never passes: kill it anyway, at rest
    model_server.reset()
    model_server.default = Reply(text="Recovered answer.")
    gateway.extra_env = database
    gateway.start()
    api = gateway.client()
    _check(api, key, gateway.home, sent, acked)
    after = api.send(key, "are you still there?")
    assert api.wait(after["run_id"])["status"] == "complete"


def test_a_run_that_kills_every_boot_is_abandoned_within_its_budget(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config="[limits]\nrecovery_attempts = 2\n")
    api = gateway.client()
    key = api.new_chat()
    gateway.kill()
    gateway.extra_env = {"HEARTH_CRASH_AT": "run_start"}
    gateway.start()
    run_id = gateway.client().send(key, "doomed")["run_id"]
    boots = 1
    while True:
        assert gateway.proc is not None
        if not _dies_unless_it_gives_up(gateway, run_id):
            break  # it stayed up, serving, with the run given up on
        assert gateway.proc.returncode == EXIT_CODE, gateway.output()
        boots += 1
        assert boots <= 5, "the crash loop was never broken"
        gateway.start(wait=False)
    assert boots == 4  # the first run, then two recoveries, then the boot that gives up
    gateway.wait_ready()
    api = gateway.client()
    run = api.http.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "abandoned" and run["recovery_attempts"] == 3
    assert "gave up" in run["sentence"]
    gateway.kill()
    gateway.extra_env = {}
    gateway.start()  # a later boot does not try it again
    api = gateway.client()
    assert api.http.get(f"/api/runs/{run_id}").json()["recovery_attempts"] == 3
    model_server.default = Reply(text="Back to normal.")
    after = api.send(key, "hello again")
    assert api.wait(after["run_id"])["status"] == "complete"
