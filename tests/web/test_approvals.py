"""Approvals over HTTP: a call that may change something waits on the owner's answer —
allow once, allow always (a standing grant, optionally for a prefix), deny — and a pending
approval survives a restart of the gateway."""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hearth.engine.reads import queries
from hearth.privacy.principal import OWNER
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.approvals import pending_approvals


def _write(path: str, content: str = "hello") -> Reply:
    return Reply(tool_calls=[Call("write_file", {"path": path, "content": content})])


def _audit(gateway: Gateway) -> list[tuple[str, str, dict[str, Any]]]:
    with sqlite3.connect(gateway.home / "hearth.db") as db:
        rows = db.execute("SELECT action, actor, detail FROM audit ORDER BY id").fetchall()
    return [(action, actor, json.loads(detail)) for action, actor, detail in rows]


def test_allow_once_runs_the_call_and_asks_again_next_time(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("a.txt"), Reply(text="Written."))
    run_id = api.send(key, "write a")["run_id"]
    frames = api.frames(key, after=0, until=lambda f: f["type"] == "approval")
    approval = frames[-1]["approval"]
    assert approval["tool"] == "write_file" and approval["target"] == "a.txt"
    assert approval["effect"] == "changes" and approval["status"] == "pending"
    assert not (gateway.home / "workspace" / "a.txt").exists()  # nothing ran before the yes
    assert api.http.get(f"/api/runs/{run_id}").json()["tool_calls"][0]["status"] == "requested"
    answered = api.http.post(f"/api/approvals/{approval['id']}",
                             json={"decision": "allow_once"})
    assert answered.status_code == 200 and answered.json()["status"] == "allowed"
    run = api.wait(run_id)
    assert run["status"] == "complete" and run["receipts"] == ["Wrote 5 bytes to a.txt."]
    assert (gateway.home / "workspace" / "a.txt").read_text() == "hello"
    again = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_decided"
    model_server.push(_write("b.txt"), Reply(text="Written."))
    api.send(key, "write b")
    assert pending_approvals(api)[0]["target"] == "b.txt"  # allow_once left no grant
    decided = [(a, who, d["tool"]) for a, who, d in _audit(gateway) if a != "tool.allowed"
               or who == "owner"]
    assert ("approval.decided", "owner", "write_file") in decided
    assert ("tool.allowed", "owner", "write_file") in decided


def test_deny_gives_the_model_a_refusal_and_the_turn_goes_on(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("secret.txt"), Reply(text="Understood, I left it."))
    run_id = api.send(key, "write it")["run_id"]
    approval = pending_approvals(api)[0]
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
    run = api.wait(run_id)
    assert run["status"] == "complete"
    assert [c["status"] for c in run["tool_calls"]] == ["denied"]
    assert run["receipts"] == []
    told = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert "denied this call" in told[0]["content"]
    assert not (gateway.home / "workspace" / "secret.txt").exists()
    assert ("tool.denied", "owner") in [(a, who) for a, who, _ in _audit(gateway)]


def test_allow_always_leaves_a_grant_limited_to_its_prefix(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("notes/one.md"), Reply(text="ok"))
    first = api.send(key, "one")["run_id"]
    approval = pending_approvals(api)[0]
    api.http.post(f"/api/approvals/{approval['id']}",
                  json={"decision": "allow_always", "prefix": "notes"})
    api.wait(first)
    model_server.push(_write("notes/two.md"), Reply(text="ok"))
    second = api.wait(api.send(key, "two")["run_id"])
    assert second["status"] == "complete"  # covered by the grant: nobody was asked
    assert api.http.get("/api/approvals").json()["approvals"] == []
    assert ("tool.allowed", "grant") in [(a, who) for a, who, _ in _audit(gateway)]
    model_server.push(_write("notesX/three.md"), Reply(text="ok"))
    api.send(key, "three")
    assert pending_approvals(api)[0]["target"] == "notesX/three.md"  # outside the prefix: asked


@pytest.mark.process_gateway  # a kill -9, then a restart
def test_a_pending_approval_survives_a_restart_and_the_turn_resumes(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("after-restart.txt"))
    run_id = api.send(key, "write after a restart")["run_id"]
    approval = pending_approvals(api)[0]
    gateway.kill()
    model_server.reset()
    model_server.push(Reply(text="Done, after the restart."))
    gateway.start()
    api = gateway.client()
    still = pending_approvals(api)
    assert [a["id"] for a in still] == [approval["id"]]
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    run = api.wait(run_id)
    assert run["status"] == "complete" and run["recovery_attempts"] == 0  # it only waited
    assert (gateway.home / "workspace" / "after-restart.txt").read_text() == "hello"
    assert len(model_server.requests) == 1  # the call was not asked for again
    assert api.messages(key)[-1]["text"] == "Done, after the restart."


@pytest.mark.process_gateway  # stops and kills of a real subprocess
def test_a_waiting_approval_survives_five_restarts_as_a_wait(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """Five restarts (stops and kill -9s, past the recovery budget of 3) while a call waits
    on the owner: each stop is clean though the grace is ten minutes (nothing runs, so it
    need not wait), the approval is the same one after each, the run counts no attempt, no
    notice says the turn was interrupted, and the card says the call waits, not "Running"."""
    gateway = gateway_factory(config="[gateway]\nshutdown_grace_seconds = 600\n")
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("five.txt"))
    run_id = api.send(key, "write after five restarts")["run_id"]
    approval = pending_approvals(api)[0]
    for restart in range(5):
        if restart % 2:
            gateway.kill()
        else:
            gateway.stop()  # a SIGTERM; a gateway still running 15 s later is killed
            assert gateway.proc is not None and gateway.proc.returncode == -signal.SIGTERM
        gateway.start()
        api = gateway.client()
        assert [a["id"] for a in pending_approvals(api)] == [approval["id"]]
    assert api.http.get(f"/api/runs/{run_id}").json()["recovery_attempts"] == 0
    assert not [m for m in api.messages(key) if m["kind"] == "notice"]
    page = api.http.get(f"/chats/{key}").text
    assert "Running…" not in page and "it waits for your answer" in page
    model_server.push(Reply(text="Written, five restarts later."))
    api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    assert api.wait(run_id)["status"] == "complete"
    assert (gateway.home / "workspace" / "five.txt").read_text() == "hello"
    assert len(model_server.requests) == 2  # the call asked for once, then the answer


def test_a_stop_withdraws_a_pending_approval(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(_write("never.txt"))
    run_id = api.send(key, "write")["run_id"]
    approval = pending_approvals(api)[0]
    api.http.post(f"/api/sessions/{key}/stop")
    assert api.wait(run_id)["status"] == "stopped"
    assert api.http.get("/api/approvals").json()["approvals"] == []
    late = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    assert late.status_code == 409
    assert not (gateway.home / "workspace" / "never.txt").exists()


@pytest.mark.parametrize("body, status", [
    ({"decision": "maybe"}, 422), ({}, 422), ({"decision": "deny", "extra": 1}, 422),
])
def test_bad_answers_are_refused_with_the_envelope(
        gateway: Gateway, body: dict[str, Any], status: int) -> None:
    answer = gateway.client().http.post("/api/approvals/apr_x", json=body)
    assert answer.status_code == status and "error" in answer.json()


def test_an_unknown_approval_is_404(gateway: Gateway) -> None:
    answer = gateway.client().http.post("/api/approvals/apr_nope",
                                        json={"decision": "deny"})
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "approval_not_found"


def test_trusted_chats_and_reads_are_not_asked(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory()
    api = gateway.client()
    trusted = api.new_chat(trust="trusted")
    model_server.push(_write("t.txt"), Reply(text="ok"))
    assert api.wait(api.send(trusted, "write")["run_id"])["status"] == "complete"
    asking = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("read_file", {"path": "t.txt"})]),
                      Reply(tool_calls=[Call("shell", {"command": "ls -la"})]),
                      Reply(text="read it"))
    assert api.wait(api.send(asking, "read")["run_id"])["status"] == "complete"
    actors = [(a, who) for a, who, _ in _audit(gateway)]
    assert ("tool.allowed", "trust") in actors and ("tool.allowed", "policy") in actors
    patched = api.http.patch(f"/api/sessions/{asking}", json={"trust": "trusted"})
    assert patched.status_code == 200 and patched.json()["trust"] == "trusted"


def test_a_turn_nobody_can_answer_for_refuses_instead_of_waiting(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    from hearth.store.schema import approvals, audit
    from tests.engine_harness import events, make_config, make_engine, new_chat, run

    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    model_server.push(_write("job-output.txt"), Reply(text="Could not write it."))

    async def body() -> tuple[dict[str, Any], list[Any], list[Any], list[Any]]:
        await engine.start()
        key = new_chat(engine, trust="ask")
        job = await engine.send(key, "nightly: write the report", kind="job", principal=OWNER)
        await engine.bus.wait_run(job.run_id, 10)
        view = await queries.run_status(engine.db, job.run_id)
        asked, rows = await engine.db.reading(lambda conn: (
            conn.execute(approvals.select()).fetchall(), conn.execute(audit.select()).fetchall()))
        transcript = events(engine, key)
        await engine.close()
        assert view is not None
        return view, asked, rows, transcript

    view, asked, rows, transcript = run(body())
    assert view["status"] == "complete" and asked == []  # nobody was asked, nothing waited
    assert not (tmp_path / "workspace" / "job-output.txt").exists()
    result = [e.content["output"] for e in transcript if e.kind == "tool_result"]
    assert "nobody can answer for this job's turn" in result[0]
    assert [(r.action, r.actor) for r in rows] == [("tool.refused", "unattended")]
