"""Retry and the repeat guard: running a turn again asks first when its attempt began a step
that may have changed something (409 retry_repeats_steps), and not otherwise."""

from __future__ import annotations

import threading

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.approvals import pending_approvals


def test_a_failed_turn_that_changed_nothing_is_retried_at_once(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(status=500), Reply(text="Second time lucky."))
    failed = api.wait(api.send(key, "try this")["run_id"])
    assert failed["ending"] == "model_error"
    retried = api.http.post(f"/api/runs/{failed['run_id']}/retry")
    assert retried.status_code == 202, retried.text
    again = api.wait(retried.json()["run_id"])
    assert again["status"] == "complete" and again["kind"] == "regenerate"
    # the message is answered again, not written again; the failed attempt is left beside the
    # path, and kept as no variant
    shown = api.messages(key)
    assert [(m["kind"], m["text"]) for m in shown] == [("user", "try this"),
                                                        ("assistant", "Second time lucky.")]
    assert shown[1]["variants"] == {"count": 1, "index": 0}
    twice = api.http.post(f"/api/runs/{failed['run_id']}/retry")  # a double click
    assert twice.status_code == 202 and twice.json()["run_id"] == again["run_id"]
    assert twice.json()["duplicate"] is True


def test_a_turn_that_wrote_a_file_asks_before_it_runs_again(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(
        Reply(tool_calls=[Call("write_file", {"path": "log.txt", "content": "once"}),
                          Call("read_file", {"path": "log.txt"})]),
        Reply(status=500),
    )
    failed = api.wait(api.send(key, "log it")["run_id"])
    assert failed["status"] == "error"
    asked = api.http.post(f"/api/runs/{failed['run_id']}/retry")
    assert asked.status_code == 409
    error = asked.json()["error"]
    assert error["code"] == "retry_repeats_steps" and "1 step" in error["message"]
    assert error["steps"] == [{"tool": "write_file", "target": "log.txt", "status": "finished",
                               "receipt": "Wrote 4 bytes to log.txt."}]  # the read is not asked
    wrong = api.http.post(f"/api/runs/{failed['run_id']}/retry", json={"confirm": "nope"})
    assert wrong.status_code == 409
    assert len(model_server.requests) == 2  # nothing ran while it asked
    model_server.push(Reply(text="Logged."))
    yes = api.http.post(f"/api/runs/{failed['run_id']}/retry",
                        json={"confirm": error["confirm"]})
    assert yes.status_code == 202
    assert api.wait(yes.json()["run_id"])["status"] == "complete"


def test_a_denied_call_is_not_asked_about(gateway: Gateway,
                                          model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "x", "content": "y"})]),
                      Reply(status=500))
    run_id = api.send(key, "write")["run_id"]
    pending = pending_approvals(api, timeout=10)
    api.http.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "deny"})
    assert api.wait(run_id)["status"] == "error"
    model_server.push(Reply(text="ok"))
    assert api.http.post(f"/api/runs/{run_id}/retry").status_code == 202


def test_retry_refuses_what_it_cannot_do(gateway: Gateway,
                                         model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    assert api.http.post("/api/runs/run_nope/retry").status_code == 404
    key = api.new_chat()
    release = threading.Event()
    model_server.push(Reply(text="slow", hold=release))
    run_id = api.send(key, "wait")["run_id"]
    running = api.http.post(f"/api/runs/{run_id}/retry")
    assert running.status_code == 409 and running.json()["error"]["code"] == "turn_running"
    release.set()
    api.wait(run_id)
    bad = api.http.post(f"/api/runs/{run_id}/retry", json={"confirm": 5})
    assert bad.status_code == 422
