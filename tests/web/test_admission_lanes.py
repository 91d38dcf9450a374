"""Admission and lanes over HTTP: idempotency under a race, one turn at a time per chat,
the global bound, and a durable queue that survives a restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Gateway, kinds


def test_fifty_concurrent_sends_of_one_message_make_one_run(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    barrier = threading.Barrier(50)

    def send(_: int) -> tuple[int, str]:
        with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=30) as http:
            barrier.wait()
            answer = http.post(f"/api/sessions/{key}/messages",
                               json={"text": "once only", "client_message_id": "m-1"})
            return answer.status_code, answer.json()["run_id"]

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(send, range(50)))
    assert {status for status, _ in results} == {202}
    run_ids = {run_id for _, run_id in results}
    assert len(run_ids) == 1
    api.wait(run_ids.pop())
    messages = api.messages(key)
    assert [m["text"] for m in messages if m["kind"] == "user"] == ["once only"]
    assert len(model_server.requests) == 1
    # and later, the same id again still answers the same run
    again = api.send(key, "once only", client_message_id="m-1")
    assert again["run_id"] == results[0][1] and again["duplicate"] is True


def test_a_second_message_waits_for_the_first_turn(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="first", hold=release, started=started), Reply(text="second"))
    first = api.send(key, "one")
    assert started.wait(10)
    second = api.send(key, "two")
    # sent into the running turn, which answers with no further step: it runs next, as its own
    assert first["status"] == "started" and second["status"] == "steered"
    time.sleep(0.5)
    assert len(model_server.requests) == 1  # the second turn has not begun
    release.set()
    assert api.wait(second["run_id"])["status"] == "complete"
    assert api.wait(first["run_id"])["status"] == "complete"
    assert len(model_server.requests) == 2
    # the second call saw the first exchange, in order
    sent = [m["content"] for m in model_server.requests[1].messages if m["role"] != "system"]
    assert sent == ["one", "first", "two"]


def test_the_global_lane_bounds_concurrent_turns(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config="[gateway]\nmax_concurrent_turns = 2\n")
    api = gateway.client()
    release = threading.Event()
    model_server.default = Reply(text="held", hold=release)
    keys = [api.new_chat() for _ in range(3)]
    runs = [api.send(key, "go")["run_id"] for key in keys]
    assert model_server.wait_for_requests(2, timeout=10)
    time.sleep(0.7)
    assert len(model_server.requests) == 2  # the third chat waits for a slot
    release.set()
    for run_id in runs:
        assert api.wait(run_id)["status"] == "complete"
    assert len(model_server.requests) == 3


@pytest.mark.process_gateway  # a kill -9, then a restart
def test_queued_messages_survive_a_restart_and_run_in_order(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory()
    api = gateway.client()
    key = api.new_chat()
    started = threading.Event()
    model_server.push(Reply(text="never finished", hold=threading.Event(), started=started))
    first = api.send(key, "m1")
    assert started.wait(10)
    queued = [api.send(key, f"m{i}")["run_id"] for i in (2, 3, 4)]
    gateway.kill()  # the acknowledged messages are on disk; nothing else is
    model_server.reset()
    model_server.push(Reply(text="a1"), Reply(text="a2"), Reply(text="a3"), Reply(text="a4"))
    gateway.start()
    api = gateway.client()
    for run_id in [first["run_id"], *queued]:
        assert api.wait(run_id)["status"] == "complete"
    messages = api.messages(key)
    users = [m["text"] for m in messages if m["kind"] == "user"]
    assert users == ["m1", "m2", "m3", "m4"]
    asked = [r.messages[-1]["content"] for r in model_server.requests]
    assert asked == ["m1", "m2", "m3", "m4"]  # the interrupted turn resumed first
    answers = [m["text"] for m in messages if m["kind"] == "assistant"]
    assert answers == ["a1", "a2", "a3", "a4"]
    notices = [m for m in messages if m["kind"] == "notice"]
    assert [n["run_id"] for n in notices] == [first["run_id"]]
    assert "interrupted by a restart and resumed" in notices[0]["text"]


def test_the_conversation_is_all_there_after_a_restart(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory()
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Noted: your cat is Miso."))
    api.wait(api.send(key, "My cat is Miso.")["run_id"])
    before = api.messages(key)
    gateway.stop()
    gateway.start()
    api = gateway.client()
    assert api.messages(key) == before
    model_server.push(Reply(text="Miso."))
    api.wait(api.send(key, "What is my cat called?")["run_id"])
    history = [m["content"] for m in model_server.requests[-1].messages if m["role"] != "system"]
    assert history == ["My cat is Miso.", "Noted: your cat is Miso.", "What is my cat called?"]
    assert kinds(api.messages(key)) == ["user", "assistant", "user", "assistant"]


def test_sse_replays_what_was_missed_exactly_once(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="first"), Reply(text="second"))
    api.wait(api.send(key, "one")["run_id"])
    seen = api.frames(key, after=0, until=lambda f: f["type"] == "status")
    seqs = [f["seq"] for f in seen if f["type"] == "message"]
    assert seqs == [1, 2]
    last = seqs[-1]
    second = api.send(key, "two")["run_id"]  # sent while no one is listening
    api.wait(second)
    again = api.frames(key, after=last, until=lambda f: f["type"] == "status")
    replayed = [f["seq"] for f in again if f["type"] == "message"]
    assert replayed == [3, 4]
    assert [f["message"]["text"] for f in again if f["type"] == "message"] == ["two", "second"]


def test_sse_live_stream_sends_each_message_once_with_deltas_and_done(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="a b c d", chunks=4, delay=0.05))
    results: list[list[dict[str, object]]] = []
    reader = threading.Thread(target=lambda: results.append(
        api.frames(key, after=0, until=lambda f: f["type"] == "done")))
    reader.start()
    time.sleep(0.3)
    run_id = api.send(key, "go")["run_id"]
    reader.join(20)
    frames = results[0]
    seqs = [f["seq"] for f in frames if f["type"] == "message"]
    assert seqs == sorted(set(seqs)) == [1, 2]
    assert "".join(str(f["text"]) for f in frames if f["type"] == "delta") == "a b c d"
    offsets = [f["offset"] for f in frames if f["type"] == "delta"]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert frames[-1] == {"type": "done", "run_id": run_id, "outcome": "complete",
                          "ending": "complete", "sentence": "The agent answered.",
                          "answer_seq": 2, "answer": "a b c d"}  # the end drawn without a read


@pytest.mark.process_gateway  # a SIGTERM and the process's exit
def test_a_stop_ends_open_event_streams_at_once(gateway: Gateway) -> None:
    api = gateway.client()
    key = api.new_chat()
    ended = threading.Event()

    def listen() -> None:
        try:
            api.frames(key, after=0, until=lambda f: False, timeout=30)
        except httpx.HTTPError:
            pass
        ended.set()

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(0.5)
    begun = time.monotonic()
    gateway.stop()
    assert gateway.proc is not None
    assert gateway.proc.returncode in (0, -15)  # uvicorn re-raises the SIGTERM it handled
    assert time.monotonic() - begun < 5  # not the 10 s grace period
    assert ended.wait(5)
