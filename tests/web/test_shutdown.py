"""Over HTTP with a gateway subprocess: Stop, graceful shutdown, and a streamed answer's
checkpoint surviving a kill."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway


def test_stop_over_http_ends_the_turn_and_the_chat_goes_on(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "sleep 30"})]),
                      Reply(text="Next."))
    first = api.send(key, "wait")["run_id"]
    deadline = time.monotonic() + 10
    while not api.http.get(f"/api/runs/{first}").json()["tool_calls"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    begun = time.monotonic()
    answer = api.http.post(f"/api/sessions/{key}/stop")
    assert answer.status_code == 200 and answer.json() == {"stopped": first}
    run = api.wait(first)
    assert time.monotonic() - begun < 4  # not the 30 s the command would have run
    assert run["status"] == "stopped" and run["sentence"] == "You stopped this turn."
    assert [c["status"] for c in run["tool_calls"]] == ["unknown"]
    assert api.http.post(f"/api/sessions/{key}/stop").json() == {"stopped": None}
    assert api.wait(api.send(key, "carry on")["run_id"])["status"] == "complete"
    assert api.http.post("/api/sessions/nope/stop").status_code == 404


@pytest.mark.process_gateway  # a real SIGTERM
def test_sigterm_lets_a_running_turn_finish_within_the_grace_period(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="slow but sure", chunks=4, delay=0.4))
    run_id = api.send(key, "take a moment")["run_id"]
    assert model_server.wait_for_requests(1, timeout=10)
    assert gateway.proc is not None
    gateway.proc.send_signal(signal.SIGTERM)
    gateway.proc.wait(15)
    gateway.start()
    run = gateway.client().http.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "complete" and run["recovery_attempts"] == 0


@pytest.mark.process_gateway  # the process's shutdown
def test_a_turn_past_the_grace_period_is_resumed_at_the_next_start(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config="[gateway]\nshutdown_grace_seconds = 1\n")
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="never", hold=threading.Event()))
    run_id = api.send(key, "long job")["run_id"]
    assert model_server.wait_for_requests(1, timeout=10)
    begun = time.monotonic()
    gateway.stop()
    assert time.monotonic() - begun < 6
    model_server.reset()
    model_server.push(Reply(text="Resumed answer."))
    gateway.start()
    api = gateway.client()
    run = api.wait(run_id)
    assert run["status"] == "complete" and run["recovery_attempts"] == 1
    texts = [(m["kind"], m["text"]) for m in api.messages(key)]
    assert texts[0] == ("user", "long job") and texts[-1] == ("assistant", "Resumed answer.")
    assert ("notice", "This turn was interrupted by a restart and resumed.") in texts


@pytest.mark.process_gateway  # a kill -9, then a restart
def test_a_streamed_answer_is_checkpointed_and_kept_partial_after_a_kill(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    words = " ".join(f"w{i}" for i in range(40))
    model_server.push(Reply(text=words, chunks=40, delay=0.1))
    run_id = api.send(key, "stream a lot")["run_id"]
    assert model_server.wait_for_requests(1, timeout=10)  # a loaded machine starts it late
    time.sleep(2.5)  # more than two checkpoints' worth of streaming
    gateway.kill()
    model_server.reset()
    model_server.push(Reply(text="The whole answer."))
    gateway.start()
    api = gateway.client()
    assert api.wait(run_id)["status"] == "complete"
    messages = api.messages(key)
    partial = [m for m in messages if m["kind"] == "assistant" and m["meta"].get("partial")]
    assert len(partial) == 1
    kept = partial[0]["text"]
    assert kept.startswith("w0 w1") and words.startswith(kept) and kept != words
    assert messages[-1]["text"] == "The whole answer."
