"""The session map over HTTP: a mark per message of the owner's, per turn's answer (with its
telemetry), per tool call, decided approval and error, each pointing at the visible index the
message list serves and the doors address."""

from __future__ import annotations

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.approvals import pending_approvals


def test_the_map_marks_each_turn_and_what_happened_inside_it(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Written."), Reply(status=500))
    run_id = api.send(key, "write a.txt")["run_id"]
    pending = pending_approvals(api, timeout=10)
    api.http.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "allow_once"})
    api.wait(run_id)
    api.wait(api.send(key, "and then?")["run_id"])
    answer = api.http.get(f"/api/sessions/{key}/map")
    assert answer.status_code == 200, answer.text
    got = answer.json()["marks"]
    assert [m["kind"] for m in got] == ["user", "tool", "approval", "assistant", "user", "error"]
    assert [m["markIndex"] for m in got] == list(range(6))
    by_index = {m["visible_index"]: m for m in api.messages(key) if m["visible_index"] is not None}
    assert by_index[got[0]["visibleIndex"]]["text"] == "write a.txt"
    assert by_index[got[3]["visibleIndex"]]["text"] == "Written."
    assert got[1]["visibleIndex"] == got[2]["visibleIndex"] == got[3]["visibleIndex"]
    assert got[1]["preview"] == "write_file" and "allow" in got[2]["preview"]
    assert got[3]["telemetry"]["model"] == "fake-model" and got[3]["telemetry"]["tool_calls"] == 1
    assert got[5]["visibleIndex"] == got[4]["visibleIndex"]  # no answer: its question
    fork = api.http.post(f"/api/sessions/{key}/fork", json={"index": got[3]["visibleIndex"]})
    last = [m for m in api.messages(fork.json()["key"]) if m["kind"] == "assistant"][-1]
    assert last["text"] == "Written."  # the same coordinate: fork copies up to that mark


def test_the_map_of_a_missing_chat_is_404(gateway: Gateway) -> None:
    answer = gateway.client().http.get("/api/sessions/nope/map")
    assert answer.status_code == 404 and answer.json()["error"]["code"]
