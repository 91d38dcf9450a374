"""The jobs API (`/api/jobs`): the owner schedules, lists, pauses and deletes jobs, a chat that
keeps nothing may not, and bad requests are refused with the envelope, against a real gateway
(the rules underneath are tests/engine/test_jobs.py's)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest

from hearth.privacy import reach
from hearth.privacy.modes import Mode
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.http import error_of
from tests.support.store import db_rows

PROMPT = "Summarise the day's notes for me"  # must never reach an audit row
HEADER = "X-Hearth-Session"


server, gateway, api = module_gateway("jobs-api")


def test_the_owner_schedules_lists_pauses_and_deletes_a_job(api: Api) -> None:
    made = api.http.post("/api/jobs", json={"prompt": PROMPT, "every_minutes": 30})
    assert made.status_code == 201, made.text
    job = made.json()
    assert (job["prompt"], job["every_minutes"], job["enabled"], job["made_by"]) == \
        (PROMPT, 30, True, "owner")
    assert job["session_key"] == f"job-{job['id']}"
    assert job["schedule"].startswith("every 30 min, next at ")
    listed = api.http.get("/api/jobs").json()["jobs"]
    assert job["id"] in [j["id"] for j in listed]

    paused = api.http.patch(f"/api/jobs/{job['id']}", json={"enabled": False})
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    resumed = api.http.patch(f"/api/jobs/{job['id']}", json={"enabled": True})
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True

    gone = api.http.delete(f"/api/jobs/{job['id']}")
    assert gone.status_code == 200 and gone.json() == {"deleted": job["id"]}
    error_of(api.http.delete(f"/api/jobs/{job['id']}"), 404, "job_not_found")
    error_of(api.http.patch(f"/api/jobs/{job['id']}", json={"enabled": True}), 404,
             "job_not_found")


def test_a_persistent_chat_may_schedule_a_job_and_is_named_its_maker(api: Api) -> None:
    key = api.new_chat()
    made = api.http.post("/api/jobs", json={"prompt": PROMPT, "in_minutes": 10},
                         headers={HEADER: key})
    assert made.status_code == 201, made.text
    assert made.json()["made_by"] == key and made.json()["every_minutes"] is None


@pytest.mark.parametrize("mode", ["incognito", "temporary", "unreadable"])
def test_a_restricted_chat_may_not_schedule_change_or_delete_a_job(
        mode: str, api: Api, gateway: Gateway) -> None:
    key = api.new_chat(memory_mode="persistent" if mode == "unreadable" else mode)
    if mode == "unreadable":
        with sqlite3.connect(gateway.home / "hearth.db", timeout=30) as conn:
            conn.execute("UPDATE sessions SET memory_mode = 'from-the-future' WHERE key = ?",
                         (key,))
    before = db_rows(gateway, "SELECT id, enabled FROM jobs ORDER BY id")
    words = f"{PROMPT} {mode}"
    said = error_of(api.http.post("/api/jobs", json={"prompt": words, "every_minutes": 60},
                                  headers={HEADER: key}), 403, "restricted_session")
    assert said == reach.lasting_refusal("a scheduled job", Mode(mode))
    owned = api.http.post("/api/jobs", json={"prompt": "owner's", "in_minutes": 60}).json()
    error_of(api.http.patch(f"/api/jobs/{owned['id']}", json={"enabled": False},
                            headers={HEADER: key}), 403, "restricted_session")
    error_of(api.http.delete(f"/api/jobs/{owned['id']}", headers={HEADER: key}), 403,
             "restricted_session")
    after = db_rows(gateway, "SELECT id, enabled FROM jobs ORDER BY id")
    assert after == [*before, (owned["id"], 1)]  # only the owner's job, untouched
    refused = db_rows(gateway, "SELECT actor, detail FROM audit WHERE action = 'job.refused' "
                               "AND session_key = ?", key)
    assert len(refused) == 3 and all(actor == "privacy" for actor, _ in refused)
    assert words not in "".join(detail for _, detail in refused)


def test_a_request_for_an_unknown_chat_is_404(api: Api) -> None:
    for answer in (api.http.post("/api/jobs", json={"prompt": PROMPT, "in_minutes": 5},
                                 headers={HEADER: "no-such-chat"}),
                   api.http.get("/api/jobs", headers={HEADER: "no-such-chat"})):
        error_of(answer, 404, "session_not_found")


@pytest.mark.parametrize("body", [
    {"prompt": PROMPT},
    {"prompt": PROMPT, "in_minutes": 5, "every_minutes": 5},
    {"prompt": PROMPT, "in_minutes": 0},
    {"prompt": PROMPT, "every_minutes": 525_601},
    {"prompt": PROMPT, "in_minutes": "5"},
    {"prompt": PROMPT, "in_minutes": 1.5},
    {"prompt": PROMPT, "in_minutes": True},
    {"prompt": "", "in_minutes": 5},
    {"prompt": "   ", "in_minutes": 5},
    {"prompt": "x" * 8001, "in_minutes": 5},
    {"prompt": 7, "in_minutes": 5},
    {"prompt": PROMPT, "in_minutes": 5, "agent": "x"},
    {"in_minutes": 5},
    [],
])
def test_a_bad_job_request_is_422_and_makes_nothing(body: Any, api: Api,
                                                    gateway: Gateway) -> None:
    before = db_rows(gateway, "SELECT count(*) FROM jobs")
    error_of(api.http.post("/api/jobs", json=body), 422, "invalid_request")
    assert db_rows(gateway, "SELECT count(*) FROM jobs") == before


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PATCH", "/api/jobs/1", {"enabled": "yes"}),
    ("PATCH", "/api/jobs/1", {"enabled": True, "prompt": "x"}),
    ("PATCH", "/api/jobs/1", {}),
    ("PATCH", "/api/jobs/0", {"enabled": True}),
    ("DELETE", "/api/jobs/abc", None),
    ("DELETE", f"/api/jobs/{2**63}", None),
])
def test_bad_changes_are_422(method: str, path: str, body: Any, api: Api) -> None:
    error_of(api.http.request(method, path, json=body), 422, "invalid_request")


def test_bad_json_is_400_never_500(api: Api) -> None:
    answer = api.http.post("/api/jobs", content=b"{not json",
                           headers={"content-type": "application/json"})
    error_of(answer, 400, "invalid_json")


def test_a_one_shot_that_ran_cannot_be_resumed(api: Api, gateway: Gateway,
                                               server: ScriptedModelServer) -> None:
    """End to end in the gateway: a due job fires, its turn runs, and it is done."""
    made = api.http.post("/api/jobs", json={"prompt": PROMPT, "in_minutes": 60}).json()
    with sqlite3.connect(gateway.home / "hearth.db", timeout=30) as conn:
        conn.execute("UPDATE jobs SET next_at = ? WHERE id = ?", (time.time() - 1, made["id"]))
    deadline = time.monotonic() + 15
    job = made
    while time.monotonic() < deadline and job["enabled"]:
        time.sleep(0.1)
        job = next(j for j in api.http.get("/api/jobs").json()["jobs"] if j["id"] == made["id"])
    assert not job["enabled"] and job["last_fired_at"] is not None
    [(run_id,)] = db_rows(gateway, "SELECT run_id FROM runs WHERE session_key = ?",
                          made["session_key"])
    assert api.wait(run_id)["status"] == "complete"
    assert [m["text"] for m in api.messages(made["session_key"]) if m["kind"] == "user"] \
        == [PROMPT]
    error_of(api.http.patch(f"/api/jobs/{made['id']}", json={"enabled": True}), 409,
             "job_finished")
