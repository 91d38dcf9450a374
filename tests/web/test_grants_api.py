"""`GET /api/grants` and `DELETE /api/grants/{id}`: the standing grants an "Always" answer
leaves (newest first, with the chat whose approval left each), and revoking one — after which
the next call it covered is asked about again — with an audit row."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.approvals import pending_in
from tests.support.http import error_of

server, gateway, api = module_gateway("grants-api")


def write(server: ScriptedModelServer, path: str) -> None:
    server.push(Reply(tool_calls=[Call("write_file", {"path": path, "content": "x"})]),
                Reply(text="ok"))


def grants(api: Api) -> list[dict[str, Any]]:
    answer = api.http.get("/api/grants")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["grants"])


def always(api: Api, server: ScriptedModelServer, key: str, path: str,
           prefix: str) -> dict[str, Any]:
    """Ask for a write in chat `key`, answer "Always" for `prefix`: the grant it left."""
    write(server, path)
    run_id = api.send(key, f"write {path}")["run_id"]
    approval = pending_in(api, key)
    answered = api.http.post(f"/api/approvals/{approval['id']}",
                             json={"decision": "allow_always", "prefix": prefix})
    assert answered.status_code == 200, answered.text
    assert api.wait(run_id)["status"] == "complete"
    made = next(g for g in grants(api) if g["approval_id"] == approval["id"])
    return made


def audit_rows(gateway: Gateway, action: str) -> list[dict[str, Any]]:
    with sqlite3.connect(gateway.home / "hearth.db") as db:
        rows = db.execute("SELECT actor, detail FROM audit WHERE action = ?", (action,))
        return [{"actor": actor, **json.loads(detail)} for actor, detail in rows]


def test_grants_are_listed_newest_first_with_their_chat(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat(trust="ask")
    older = always(api, server, key, "docs/a.md", "docs")
    newer = always(api, server, key, "drafts/b.md", "drafts")
    assert older["tool"] == newer["tool"] == "write_file"
    assert (older["agent"], older["prefix"], older["session"]) == ("default", "docs", key)
    assert isinstance(older["id"], int) and older["created_at"].startswith("20")
    ids = [g["id"] for g in grants(api)]
    assert ids.index(newer["id"]) < ids.index(older["id"])


def test_a_revoked_grant_no_longer_covers_the_next_call(
        api: Api, gateway: Gateway, server: ScriptedModelServer) -> None:
    key = api.new_chat(trust="ask")
    grant = always(api, server, key, "notes/one.md", "notes")
    write(server, "notes/two.md")
    covered = api.wait(api.send(key, "write two")["run_id"])
    assert covered["status"] == "complete"  # nobody was asked: the grant covered it

    answer = api.http.delete(f"/api/grants/{grant['id']}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["revoked"]["id"] == grant["id"]
    assert grant["id"] not in [g["id"] for g in grants(api)]
    revoked = [row for row in audit_rows(gateway, "grant.revoked") if row["grant"] == grant["id"]]
    assert revoked == [{"actor": "owner", "grant": grant["id"], "tool": "write_file",
                        "agent": "default", "prefix": "notes",
                        "approval": grant["approval_id"]}]

    write(server, "notes/three.md")
    run_id = api.send(key, "write three")["run_id"]
    asked = pending_in(api, key)  # asked again
    assert asked["tool"] == "write_file" and asked["target"] == "notes/three.md"
    api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "deny"})
    assert api.wait(run_id)["tool_calls"][0]["status"] == "denied"


def test_revoking_what_is_not_there_is_refused(api: Api) -> None:
    error_of(api.http.delete(f"/api/grants/{2**40}"), 404, "grant_not_found")
    for bad in ("abc", "0", "-1", str(2**63)):
        error_of(api.http.delete(f"/api/grants/{bad}"), 422, "invalid_request")
