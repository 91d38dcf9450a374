"""Apps with scoped tokens: a token per app, kept hashed, held to the permissions it was given
(403 `app_scope` with an audit row outside them), reaching only the chats it started (another
app's or the owner's answer 404 as if there were none), revoked at once, and never answered by
the owner's trust or standing grants."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.approvals import pending_in
from tests.support.apps import app_token
from tests.support.http import error_of
from tests.support.store import db_rows

server, gateway, api = module_gateway("apps-api")


@pytest.fixture
def alpha(gateway: Gateway, api: Api) -> Iterator[Api]:
    client = gateway.client(app_token(api, "alpha", "read_chats", "send_messages"))
    yield client
    client.http.close()


@pytest.fixture
def beta(gateway: Gateway, api: Api) -> Iterator[Api]:
    client = gateway.client(app_token(api, "beta", "read_chats", "send_messages"))
    yield client
    client.http.close()


def test_the_token_is_shown_once_and_kept_only_hashed(gateway: Gateway, api: Api) -> None:
    made = api.http.post("/api/apps", json={"name": "hashed", "permissions": ["read_chats"]})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert token.startswith("hearth_app_") and len(token) > 40
    assert made.json()["app"]["permissions"] == ["read_chats"]
    stored = db_rows(gateway, "SELECT token_hash FROM apps WHERE name = 'hashed'")
    assert stored == [(hashlib.sha256(token.encode()).hexdigest(),)]
    listed = api.http.get("/api/apps").json()
    assert token not in json.dumps(listed)
    assert {"name": "hashed"}.items() <= next(
        a for a in listed["apps"] if a["name"] == "hashed").items()
    files = [gateway.home / "hearth.db", gateway.home / "hearth.db-wal"]
    assert token.encode() not in b"".join(p.read_bytes() for p in files if p.exists())
    used = gateway.client(token)
    assert used.http.get("/api/sessions").status_code == 200
    assert token not in gateway.output()  # nor in any log line
    error_of(api.http.post("/api/apps", json={"name": "hashed", "permissions": ["admin"]}),
             409, "app_exists")
    error_of(api.http.post("/api/apps", json={"name": "x", "permissions": ["everything"]}),
             422, "invalid_permissions")
    error_of(api.http.post("/api/apps", json={"name": "bad name!", "permissions": ["admin"]}),
             422, "invalid_app_name")


def test_a_route_outside_the_apps_scope_is_refused_with_an_audit_row(
        gateway: Gateway, api: Api) -> None:
    reader = gateway.client(app_token(api, "reader", "read_chats"))
    sentence = error_of(reader.http.post("/api/sessions", json={}), 403, "app_scope")
    assert "send_messages" in sentence
    error_of(reader.http.get("/api/memory"), 403, "app_scope")
    error_of(reader.http.get("/api/grants"), 403, "app_scope")  # the owner's alone
    error_of(reader.http.get("/api/apps"), 403, "app_scope")  # admin only
    assert reader.http.get("/settings").status_code == 403  # a dashboard page: the owner's
    assert reader.http.get("/api/sessions").status_code == 200  # within its scope
    rows = db_rows(gateway, "SELECT actor, detail FROM audit WHERE action = 'app.refused'")
    details = [json.loads(detail) for actor, detail in rows if actor == "app:reader"]
    assert {"app": "reader", "route": "POST /api/sessions",
            "permission": "send_messages"} in details
    assert {"app": "reader", "route": "GET /api/grants", "permission": "owner"} in details


def test_an_app_is_refused_another_apps_chat_and_the_owners(
        api: Api, alpha: Api, beta: Api, server: ScriptedModelServer) -> None:
    mine = alpha.new_chat()
    theirs = beta.new_chat()
    owners = api.new_chat()
    server.push(Reply(text="hello"))
    run = api.send(owners, "a word of the owner's, zebra")["run_id"]
    api.wait(run)
    for key in (theirs, owners):
        for method, path in (("GET", ""), ("GET", "/export"), ("GET", "/map"),
                             ("GET", "/events?after=0"), ("GET", "/tools"),
                             ("DELETE", ""), ("PATCH", ""), ("POST", "/stop")):
            body = {"title": "x"} if method == "PATCH" else None
            answer = alpha.http.request(method, f"/api/sessions/{key}{path}", json=body)
            error_of(answer, 404, "session_not_found")
        error_of(alpha.http.post(f"/api/sessions/{key}/messages", json={"text": "hi"}),
                 404, "session_not_found")
        error_of(alpha.http.post(f"/api/sessions/{key}/fork", json={"index": 0}),
                 404, "session_not_found")
    error_of(alpha.http.get(f"/api/runs/{run}"), 404, "run_not_found")
    named = alpha.http.post("/api/sessions", json={"name": owners})  # its own namespace
    assert named.status_code == 201 and named.json()["key"] == f"alpha~{owners}"
    listed = {s["key"] for s in alpha.http.get("/api/sessions").json()["sessions"]}
    assert mine in listed and theirs not in listed and owners not in listed
    found = alpha.http.get("/api/search", params={"q": "zebra"}).json()
    assert found["results"] == []
    assert api.http.get("/api/search", params={"q": "zebra"}).json()["results"]
    everything = {s["key"]: s for s in api.http.get("/api/sessions").json()["sessions"]}
    assert everything[mine]["created_by_app"] == "alpha"
    assert everything[theirs]["created_by_app"] == "beta"
    assert everything[owners]["created_by_app"] is None
    assert api.http.get(f"/api/sessions/{theirs}").status_code == 200  # the owner sees all


def test_an_apps_fork_of_its_own_chat_is_its_own(
        api: Api, alpha: Api, beta: Api, server: ScriptedModelServer) -> None:
    key = alpha.new_chat()
    server.push(Reply(text="forked answer"))
    alpha.wait(alpha.send(key, "to fork")["run_id"])
    forked = alpha.http.post(f"/api/sessions/{key}/fork", json={"index": 1})
    assert forked.status_code in (200, 201), forked.text
    fork_key = forked.json()["session"]["key"] if "session" in forked.json() else \
        forked.json()["key"]
    assert alpha.http.get(f"/api/sessions/{fork_key}").json()["session"][
        "created_by_app"] == "alpha"
    error_of(beta.http.get(f"/api/sessions/{fork_key}"), 404, "session_not_found")


def test_revoking_takes_effect_at_the_next_request(gateway: Gateway, api: Api) -> None:
    doomed = gateway.client(app_token(api, "doomed", "read_chats"))
    assert doomed.http.get("/api/sessions").status_code == 200
    answer = api.http.delete("/api/apps/doomed")
    assert answer.status_code == 200 and answer.json()["app"]["revoked"] is True
    error_of(doomed.http.get("/api/sessions"), 401, "unauthorized")
    error_of(api.http.delete("/api/apps/nobody"), 404, "app_not_found")


def test_an_apps_call_asks_the_owner_whatever_trust_and_grants_say(
        gateway: Gateway, api: Api, alpha: Api, server: ScriptedModelServer) -> None:
    # the owner's standing grant for write_file under docs/, made as the owner makes one
    owners = api.new_chat(trust="ask")
    server.push(Reply(tool_calls=[Call("write_file", {"path": "docs/a.md", "content": "x"})]),
                Reply(text="ok"))
    run = api.send(owners, "write it")["run_id"]
    asked = pending_in(api, owners)
    api.http.post(f"/api/approvals/{asked['id']}",
                  json={"decision": "allow_always", "prefix": "docs"})
    api.wait(run)
    # the app's chat, trusted too: the same call still waits on the owner
    key = alpha.new_chat(trust="trusted")
    server.push(Reply(tool_calls=[Call("write_file", {"path": "docs/b.md", "content": "y"})]),
                Reply(text="done"))
    run = alpha.send(key, "write it")["run_id"]
    approval = pending_in(alpha, key)  # the app sees what waits in its own chat
    assert approval["tool"] == "write_file"
    assert all(a["session"] == key for a in alpha.http.get("/api/approvals").json()["approvals"])
    error_of(alpha.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"}),
             403, "app_scope")  # it approves none of its calls
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
    assert alpha.wait(run)["status"] == "complete"


def test_the_openai_api_takes_an_apps_token_with_send_messages(
        gateway: Gateway, api: Api, alpha: Api, server: ScriptedModelServer) -> None:
    models = alpha.http.get("/v1/models")
    assert models.status_code == 200 and models.json()["object"] == "list"
    server.push(Reply(text="from v1"))
    answer = alpha.http.post("/v1/chat/completions", json={
        "model": "hearth", "user": "alpha-v1",
        "messages": [{"role": "user", "content": "hello"}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "from v1"
    chat = api.http.get("/api/sessions/alpha~alpha-v1").json()["session"]  # its own namespace
    assert chat["created_by_app"] == "alpha"
    owners = api.new_chat()
    server.push(Reply(text="its own"))
    same_name = alpha.http.post("/v1/chat/completions", headers={"X-Hearth-Session": owners},
                                json={"model": "hearth",
                                      "messages": [{"role": "user", "content": "hi"}]})
    assert same_name.status_code == 200  # the name in the app's own namespace, not the owner's
    assert same_name.headers["X-Hearth-Session"] == f"alpha~{owners}"
    assert api.http.get(f"/api/sessions/{owners}").json()["messages"] == []
    reader = gateway.client(app_token(api, "v1-reader", "read_chats"))
    refused = reader.http.post("/v1/chat/completions", json={
        "model": "hearth", "messages": [{"role": "user", "content": "hello"}]})
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "app_scope" and "send_messages" in error["message"]
    assert set(error) == {"message", "type", "param", "code"}  # OpenAI's shape


def test_an_admin_app_manages_apps_and_still_reaches_only_its_own_chats(
        gateway: Gateway, api: Api) -> None:
    admin = gateway.client(app_token(api, "keeper", "admin"))
    assert {a["name"] for a in admin.http.get("/api/apps").json()["apps"]} >= {"keeper"}
    owners = api.new_chat()
    error_of(admin.http.get(f"/api/sessions/{owners}"), 404, "session_not_found")
    error_of(admin.http.get("/api/export"), 403, "app_scope")  # the owner's alone
    # a chat named by X-Hearth-Session is reached as any other
    error_of(admin.http.get("/api/memory", headers={"X-Hearth-Session": owners}),
             404, "session_not_found")
    assert admin.http.get("/api/memory").status_code == 200
