"""Who acts: every run carries its principal from admission, and an app never borrows the
owner's trust, grants, folders, memory, chats or names.

Each test reproduces one of an outside review's findings against the code before principals
(seen failing there first) and holds the fix:
- an app's job, and an app's helper, ran on the owner's standing grant;
- an app opened a chat on any folder of the machine;
- an app's turn searched the owner's chats and listed the owner's memory, and the owner's memory
  was in its system prompt;
- an app's chat named `job-<id>` took the owner's job's turns, and `409 name_taken` against
  `201` told an app which names the owner uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, iter_texts, module_gateway
from tests.support.approvals import pending_in
from tests.support.apps import app_token
from tests.support.http import error_of
from tests.support.store import db_rows

# One turn at a time: a helper's turn starts once its parent's ends, so scripted replies
# are taken in the order the tests push them.
server, gateway, api = module_gateway("who-acts", "[gateway]\nmax_concurrent_turns = 1\n")


@pytest.fixture(scope="module")
def owners_grant(api: Api, server: ScriptedModelServer, gateway: Gateway) -> None:
    """The owner's standing grant for write_file, on any target, made as the owner makes one."""
    key = api.new_chat(trust="ask")
    server.push(Reply(tool_calls=[Call("write_file", {"path": "owners.txt", "content": "x"})]),
                Reply(text="written"))
    run = api.send(key, "write it")["run_id"]
    asked = pending_in(api, key)
    api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "allow_always"})
    assert api.wait(run)["status"] == "complete"
    assert (gateway.home / "workspace" / "owners.txt").exists()


@pytest.fixture
def jobber(gateway: Gateway, api: Api) -> Iterator[Api]:
    client = gateway.client(app_token(api, "jobber", "read_chats", "send_messages", "run_jobs"))
    yield client
    client.http.close()


def results_of(api: Api, key: str) -> list[str]:
    return list(iter_texts(api.messages(key), "tool_result"))


def test_an_apps_job_asks_and_is_refused_not_run_on_the_owners_grant(
        api: Api, jobber: Api, server: ScriptedModelServer, gateway: Gateway,
        owners_grant: None) -> None:
    """Failed before principals: the job's write ran on the owner's Always grant."""
    chat = jobber.new_chat()
    made = jobber.http.post("/api/jobs", headers={"X-Hearth-Session": chat},
                            json={"prompt": "write the report", "every_minutes": 60})
    assert made.status_code == 201, made.text
    job = made.json()
    server.push(Reply(tool_calls=[Call("write_file", {"path": "by-app-job.txt",
                                                       "content": "app"})]),
                Reply(text="could not"))
    fired = jobber.http.post(f"/api/jobs/{job['id']}/run", headers={"X-Hearth-Session": chat})
    assert fired.status_code == 202, fired.text
    body = fired.json()
    assert api.wait(body["run_id"])["status"] == "complete"
    assert not (gateway.home / "workspace" / "by-app-job.txt").exists()
    job_chat = body["session_key"]
    assert job_chat.startswith("jobber~job-")  # the app's namespace, the app's chat
    assert api.http.get(f"/api/sessions/{job_chat}").json()["session"]["created_by_app"] \
        == "jobber"
    said = " ".join(results_of(api, job_chat))
    assert "runs for app jobber" in said and "not run" in said
    principal = db_rows(gateway, "SELECT principal FROM runs WHERE run_id = ?",
                        body["run_id"])
    assert principal == [("app:jobber",)]


def test_an_apps_helper_never_runs_on_the_owners_grant(
        api: Api, gateway: Gateway, server: ScriptedModelServer, owners_grant: None) -> None:
    """Failed before principals: the owner approved the app's spawn_helpers card, and the
    helper's own write then ran on the owner's Always grant."""
    app = gateway.client(app_token(api, "helpful", "read_chats", "send_messages"))
    key = app.new_chat()
    server.push(Reply(tool_calls=[Call("spawn_helpers", {"tasks": ["write the file"]})]),
                Reply(text="handed over"),
                Reply(tool_calls=[Call("write_file", {"path": "by-app-helper.txt",
                                                      "content": "helper"})]),
                Reply(text="helper could not"), Reply(text="noted"))
    run = app.send(key, "get a helper to write it")["run_id"]
    asked = pending_in(api, key)
    assert asked["tool"] == "spawn_helpers" and asked["asked_by"] == "app helpful"
    assert asked["always_allowed"] is False  # a grant would serve the owner's work, not its
    error_of(api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "allow_always"}),
             409, "always_for_others")
    api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "allow_once"})
    assert api.wait(run)["status"] == "complete"
    helper = app.http.get(f"/api/sessions/{key}").json()["helpers"][0]["key"]
    assert helper.startswith("helpful~")
    runs = db_rows(gateway, "SELECT run_id, principal FROM runs WHERE session_key = ?", helper)
    assert runs and all(principal == "app:helpful" for _, principal in runs)
    for run_id, _ in runs:
        api.wait(run_id)
    assert not (gateway.home / "workspace" / "by-app-helper.txt").exists()
    assert "not run" in " ".join(results_of(api, helper))


def test_an_app_opens_no_chat_on_a_folder_outside_the_workspace(
        api: Api, gateway: Gateway, tmp_path: Path) -> None:
    """Failed before principals: an app's chat could work in any folder (201)."""
    app = gateway.client(app_token(api, "folders", "read_chats", "send_messages"))
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "id_ed25519").write_text("PRIVATE")
    refused = app.http.post("/api/sessions", json={"workspace_dir": str(secret)})
    sentence = error_of(refused, 403, "app_scope")
    assert "choose_folders" in sentence
    assert app.http.post("/api/sessions", json={}).status_code == 201  # the workspace: its own
    chooser = gateway.client(app_token(api, "chooser", "send_messages", "choose_folders"))
    assert chooser.http.post("/api/sessions",
                             json={"workspace_dir": str(secret)}).status_code == 201
    assert api.http.post("/api/sessions", json={"workspace_dir": str(secret)}).status_code == 201


def test_an_apps_turn_reads_none_of_the_owners_memory_or_chats(
        api: Api, gateway: Gateway, server: ScriptedModelServer) -> None:
    """Failed before principals: chat_search and memory_list in an app's chat answered with
    the owner's chats and memory, and the owner's memory was in the app's system prompt."""
    taught = api.http.post("/api/memory", json={"text": "The owner hides a platypusgem.",
                                                "kind": "fact"})
    assert taught.status_code in (200, 201), taught.text
    owners = api.new_chat()
    server.push(Reply(text="noted"))
    api.wait(api.send(owners, "my zebrafishvault is behind the shed")["run_id"])
    app = gateway.client(app_token(api, "curious", "read_chats", "send_messages"))
    key = app.new_chat()
    before = len(server.calls())
    server.push(Reply(tool_calls=[Call("chat_search", {"query": "zebrafishvault"}),
                                  Call("memory_list", {}),
                                  Call("read_file", {"path": "memory/MEMORY.md"})]),
                Reply(text="nothing"))
    assert app.wait(app.send(key, "what do you know about the owner?")["run_id"])["status"] \
        == "complete"
    results = results_of(app, key)
    assert results and all("manage_memory" in text for text in results[:2]), results
    sent = json.dumps([call.body for call in server.calls()[before:]])
    assert "zebrafishvault is behind" not in sent and "platypusgem" not in sent
    remembering = gateway.client(app_token(api, "rememberer", "read_chats", "send_messages",
                                           "manage_memory"))
    own = remembering.new_chat()
    server.push(Reply(text="my own zebrafishvault notes"))
    remembering.wait(remembering.send(own, "zebrafishvault notes of mine")["run_id"])
    asking = remembering.new_chat()
    server.push(Reply(tool_calls=[Call("chat_search", {"query": "zebrafishvault"})]),
                Reply(text="found"))
    remembering.wait(remembering.send(asking, "search")["run_id"])
    found = " ".join(results_of(remembering, asking))
    assert own in found and owners not in found and "behind the shed" not in found


def test_names_never_cross_principals(api: Api, gateway: Gateway,
                                      server: ScriptedModelServer) -> None:
    """Failed before principals: an app's chat named `job-<id>` took the owner's job's turn
    (the app read its prompt and answer), and an owner's name answered 409 to an app."""
    app = gateway.client(app_token(api, "squatter", "read_chats", "send_messages"))
    job = api.http.post("/api/jobs", json={"prompt": "the owner's private prompt",
                                           "every_minutes": 60}).json()
    squat = app.http.post("/api/sessions", json={"name": f"job-{job['id']}"})
    assert squat.status_code == 201 and squat.json()["key"] == f"squatter~job-{job['id']}"
    server.push(Reply(text="the owner's private answer"))
    fired = api.http.post(f"/api/jobs/{job['id']}/run").json()
    api.wait(fired["run_id"])
    assert fired["session_key"] == f"job-{job['id']}"
    owners_job_chat = api.http.get(f"/api/sessions/job-{job['id']}").json()["session"]
    assert owners_job_chat["created_by_app"] is None
    assert app.messages(squat.json()["key"]) == []
    error_of(app.http.get(f"/api/sessions/job-{job['id']}"), 404, "session_not_found")
    owners = api.new_chat(name="owners-diary")
    taken = app.http.post("/api/sessions", json={"name": "owners-diary"})
    unused = app.http.post("/api/sessions", json={"name": "never-used-name"})
    assert taken.status_code == unused.status_code == 201  # the same answer, nothing revealed
    assert taken.json()["key"] == "squatter~owners-diary" != owners
    error_of(api.http.post("/api/sessions", json={"name": "squatter~owners-diary"}), 422,
             "invalid_name")  # the owner's names never spell an app's
