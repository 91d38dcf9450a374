"""`/healthz`'s `tasks` figure (web/http/vitals.py): the event loop's asyncio tasks, shown to
a request carrying the gateway's token alone, and counting the tasks there are (turns held on
the model add theirs; once they end the count comes back down)."""

from __future__ import annotations

import threading

import httpx

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Gateway
from tests.support.polling import until

HELD = 3


def tasks_of(gateway: Gateway, headers: dict[str, str]) -> int | None:
    answer = httpx.get(f"{gateway.url}/healthz", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    tasks = answer.json().get("tasks")
    assert tasks is None or isinstance(tasks, int)
    return tasks


def owner(gateway: Gateway) -> int:
    tasks = tasks_of(gateway, {"Authorization": f"Bearer {TOKEN}"})
    assert tasks is not None and tasks >= 1  # at least the request's own
    return tasks


def test_only_the_token_shows_tasks(gateway: Gateway) -> None:
    owner(gateway)
    for headers in ({}, {"Authorization": "Bearer wrong-token"},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN},
                    {"Authorization": f"Bearer {TOKEN}x"}):
        assert tasks_of(gateway, headers) is None, headers


def test_tasks_counts_turns_held_and_comes_back_down(gateway: Gateway,
                                                     model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    api.wait(api.send(api.new_chat(), "warm up")["run_id"])  # the first turn's lazy set-up
    until(lambda: owner(gateway) == owner(gateway), what="the task count to settle")
    rest = owner(gateway)
    release = threading.Event()
    started = [threading.Event() for _ in range(HELD)]
    model_server.push(*(Reply(text="later", hold=release, started=each) for each in started))
    runs = [api.send(api.new_chat(), f"hold {n}")["run_id"] for n in range(HELD)]
    for each in started:
        assert each.wait(15)
    held = owner(gateway)
    release.set()
    for run_id in runs:
        api.wait(run_id)
    assert held >= rest + HELD, (rest, held)
    until(lambda: owner(gateway) <= rest, what=f"the tasks back to {rest} (held: {held})")
