"""An app's scheduled jobs: an app with `run_jobs` schedules and reads jobs only through a chat
of its own, and sees, runs, changes and deletes only the jobs that chat made; the owner's
jobs and another chat's are 404 to it, as if they did not exist."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Gateway


def test_an_app_reaches_only_the_jobs_its_own_chat_made(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory()
    owner = gateway.client()
    made = owner.http.post("/api/apps", json={"name": "cron-bot", "permissions": [
        "run_jobs", "send_messages", "read_chats"]})
    assert made.status_code == 201, made.text
    app = gateway.client(made.json()["token"])
    owners_job = owner.http.post("/api/jobs", json={"prompt": "mine", "every_minutes": 60})
    assert owners_job.status_code == 201
    chat = app.http.post("/api/sessions", json={}).json()["key"]
    bare = app.http.get("/api/jobs")
    assert bare.status_code == 403 and bare.json()["error"]["code"] == "app_scope"
    own = {"X-Hearth-Session": chat}
    apps_job = app.http.post("/api/jobs", headers=own,
                             json={"prompt": "the app's", "every_minutes": 30})
    assert apps_job.status_code == 201, apps_job.text
    listed = app.http.get("/api/jobs", headers=own).json()["jobs"]
    assert [job["prompt"] for job in listed] == ["the app's"]
    theirs = owners_job.json()["id"]
    for method, path, body in (("PATCH", f"/api/jobs/{theirs}", {"enabled": False}),
                               ("DELETE", f"/api/jobs/{theirs}", None),
                               ("POST", f"/api/jobs/{theirs}/run", None)):
        answer = app.http.request(method, path, headers=own, json=body)
        assert answer.status_code == 404, (method, answer.text)
    assert app.http.patch(f"/api/jobs/{apps_job.json()['id']}", headers=own,
                          json={"enabled": False}).status_code == 200
    everything = owner.http.get("/api/jobs").json()["jobs"]
    assert {job["prompt"] for job in everything} == {"mine", "the app's"}
    assert next(j for j in everything if j["prompt"] == "mine")["enabled"] is True
