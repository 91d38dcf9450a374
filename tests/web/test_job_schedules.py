"""Cron and one-shot jobs in a real gateway: made through the API (and the tool), refused with
the field at fault, caught up once or skipped after a restart (the gateway stopped while they
fell due), and run now. The next-fire arithmetic itself is tested in test_schedules.py."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from hearth.engine.background.job_tool import ScheduleJob
from hearth.store import jobs as job_store
from hearth.store.db import Database
from hearth.tools.base import ToolContext, ToolRefused
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.clock import FakeClock
from tests.support.http import error_of
from tests.support.polling import until
from tests.support.store import db_rows

PROMPT = "Water the plants"


def made(api: Api, **body: Any) -> dict[str, Any]:
    answer = api.http.post("/api/jobs", json={"prompt": PROMPT, **body})
    assert answer.status_code == 201, answer.text
    job: dict[str, Any] = answer.json()
    return job


def test_a_cron_job_is_made_listed_in_words_with_its_next_time(gateway: Gateway) -> None:
    api = gateway.client()
    job = made(api, cron="0 9 * * 1-5", timezone="Europe/Paris")
    assert (job["kind"], job["cron"], job["timezone"], job["missed"]) == \
        ("cron", "0 9 * * 1-5", "Europe/Paris", "once")
    assert job["schedule"].startswith("every weekday at 09:00 (Europe/Paris), next at ")
    due = datetime.fromisoformat(job["next_at"])
    assert due.timestamp() > time.time()
    local = due.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute, local.weekday() < 5) == (9, 0, True)
    listed = api.http.get("/api/jobs").json()["jobs"]
    assert [j["schedule"] for j in listed if j["id"] == job["id"]] == [job["schedule"]]


def test_an_at_job_runs_once_at_its_time_in_its_zone(gateway: Gateway) -> None:
    api = gateway.client()
    job = made(api, at="2099-12-24T09:00", timezone="America/New_York")
    assert job["kind"] == "once" and job["timezone"] == "America/New_York"
    assert datetime.fromisoformat(job["next_at"]).timestamp() == \
        datetime.fromisoformat("2099-12-24T14:00+00:00").timestamp()
    soon = made(api, at="in 20 minutes", missed="skip")
    assert abs(datetime.fromisoformat(soon["next_at"]).timestamp() - time.time() - 1200) < 60
    assert soon["missed"] == "skip"


@pytest.mark.parametrize(("body", "code", "words"), [
    ({"cron": "61 * * * *"}, "invalid_cron",
     "minute field (1st field, at character 1) '61' is out of range (0-59)"),
    ({"cron": "0 9 * *"}, "invalid_cron", "has 4 fields"),
    ({"cron": "0 9 * * 1-5", "timezone": "Mars/Olympus"}, "invalid_timezone", "Mars/Olympus"),
    ({"at": "2001-01-01T09:00"}, "invalid_at", "in the past"),
    ({"at": "next blue moon"}, "invalid_at", "neither an ISO 8601"),
    ({"every_minutes": 5, "timezone": "UTC"}, "invalid_request", "timezone goes with"),
    ({"cron": "0 9 * * *", "every_minutes": 5}, "invalid_request", "exactly one"),
    ({"cron": "0 9 * * *", "missed": "twice"}, "invalid_request", ""),
    ({"cron": 5}, "invalid_request", ""),
    ({"cron": "x" * 201}, "invalid_request", ""),
])
def test_a_bad_schedule_is_422_with_a_sentence_and_makes_nothing(
        body: dict[str, Any], code: str, words: str, gateway: Gateway) -> None:
    api = gateway.client()
    said = error_of(api.http.post("/api/jobs", json={"prompt": PROMPT, **body}), 422, code)
    assert words in said
    assert db_rows(gateway, "SELECT count(*) FROM jobs") == [(0,)]


def fell_due_while_down(gateway: Gateway, job_ids: list[int], hours: float) -> None:
    with sqlite3.connect(gateway.home / "hearth.db", timeout=30) as conn:
        for job_id in job_ids:
            conn.execute("UPDATE jobs SET next_at = ? WHERE id = ?",
                         (time.time() - hours * 3600, job_id))


def runs_of(gateway: Gateway, key: str) -> list[tuple[Any, ...]]:
    return db_rows(gateway, "SELECT run_id FROM runs WHERE session_key = ?", key)


def test_after_a_restart_a_missed_job_runs_once_or_is_skipped(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Done.")
    first = gateway_factory()
    api = first.client()
    once = made(api, cron="*/5 * * * *", timezone="UTC")
    skip = made(api, cron="*/5 * * * *", timezone="UTC", missed="skip")
    every = made(api, every_minutes=60, missed="skip")
    first.stop()
    fell_due_while_down(first, [once["id"], skip["id"], every["id"]], hours=3)  # 36 fires

    clock = FakeClock()  # the scheduler ticks as the test advances it
    again = gateway_factory(clock=clock)
    api = again.client()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not runs_of(again, once["session_key"]):
        time.sleep(0.1)
    [(run_id,)] = runs_of(again, once["session_key"])
    assert api.wait(run_id)["status"] == "complete"
    until(lambda: clock.paused("scheduler"), what="the scheduler's pause")
    clock.advance(1.5)  # more ticks: nothing more fires
    assert len(runs_of(again, once["session_key"])) == 1
    assert runs_of(again, skip["session_key"]) == []
    assert runs_of(again, every["session_key"]) == []
    now = time.time()
    listed = {j["id"]: j for j in api.http.get("/api/jobs").json()["jobs"]}
    for job in (once, skip, every):
        assert datetime.fromisoformat(listed[job["id"]]["next_at"]).timestamp() > now - 2
        assert listed[job["id"]]["enabled"]
    assert listed[once["id"]]["last_fired_at"] is not None
    assert listed[skip["id"]]["last_fired_at"] is None
    skipped = db_rows(again, "SELECT detail FROM audit WHERE action = 'job.skipped'")
    assert len(skipped) == 2 and all('"missed"' in d and PROMPT not in d for (d,) in skipped)


def test_a_job_is_run_now_as_a_run_of_its_chat_and_keeps_its_schedule(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Watered.")
    api = gateway.client()
    job = made(api, cron="0 9 * * *", timezone="UTC")
    answer = api.http.post(f"/api/jobs/{job['id']}/run")
    assert answer.status_code == 202, answer.text
    run = answer.json()
    assert run["session_key"] == job["session_key"]
    assert api.wait(run["run_id"])["status"] == "complete"
    texts = [m["text"] for m in api.messages(job["session_key"])]
    assert texts[:2] == [PROMPT, "Watered."]
    [after] = [j for j in api.http.get("/api/jobs").json()["jobs"] if j["id"] == job["id"]]
    assert after["next_at"] == job["next_at"] and after["last_fired_at"] is not None
    error_of(api.http.post("/api/jobs/9999/run"), 404, "job_not_found")
    error_of(api.http.post("/api/jobs/abc/run"), 422, "invalid_request")


def test_a_restricted_chat_may_not_run_a_job_now(gateway: Gateway) -> None:
    api = gateway.client()
    job = made(api, every_minutes=60)
    key = api.new_chat(memory_mode="incognito")
    error_of(api.http.post(f"/api/jobs/{job['id']}/run", headers={"X-Hearth-Session": key}),
             403, "restricted_session")
    assert runs_of(gateway, job["session_key"]) == []


# ------------------------------------------------------------------ the tool


def test_the_tool_schedules_a_cron_job_and_refuses_a_bad_one(db: Database,
                                                            ctx: ToolContext) -> None:
    outcome = asyncio.run(ScheduleJob(db).run(
        {"prompt": PROMPT, "cron": "30 7 * * *", "timezone": "Asia/Tokyo", "missed": "skip"},
        ctx))
    assert outcome.receipt.startswith("Scheduled job #1: every day at 07:30 (Asia/Tokyo), "
                                      "next at ")
    with db.read() as conn:
        job = job_store.get(conn, 1)
    assert job is not None and (job.cron, job.timezone, job.missed) == \
        ("30 7 * * *", "Asia/Tokyo", "skip")
    with pytest.raises(ToolRefused) as refused:
        asyncio.run(ScheduleJob(db).run({"prompt": PROMPT, "cron": "0 9 * 13 *"}, ctx))
    assert "month field (4th field, at character 7) '13' is out of range (1-12)" in \
        refused.value.sentence
    reminder = asyncio.run(ScheduleJob(db).run(
        {"prompt": PROMPT, "at": "tomorrow 9:00", "timezone": "Europe/Paris"}, ctx))
    assert reminder.receipt.startswith("Scheduled job #2: once, at ")
    assert reminder.receipt.endswith("09:00 (Europe/Paris).")
