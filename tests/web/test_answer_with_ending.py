"""The answer with the ending, over HTTP: `GET /api/runs/{id}/wait?message=true` answers the
run's answer with its end, and the SSE `done` frame carries the answer's seq and text, live
and replayed (`after=`), so a client draws the end without another read.

One gateway serves the module; every test makes its own chats.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, module_gateway
from tests.support.http import error_of

server, gateway, api = module_gateway("answer-with-ending")


def wait(api: Api, run_id: str, **params: Any) -> dict[str, Any]:
    answer = api.http.get(f"/api/runs/{run_id}/wait", params={"timeout": 20, **params},
                          timeout=25)
    assert answer.status_code == 200, answer.text
    body = dict(answer.json())
    assert not body["timed_out"], body
    return body


def replayed_done(api: Api, key: str, after: int, run_id: str) -> dict[str, Any]:
    frames = api.frames(key, after, lambda f: f["type"] == "status", timeout=10)
    done = [f for f in frames if f["type"] == "done" and f["run_id"] == run_id]
    assert len(done) == 1, frames
    return done[0]


def test_wait_with_message_answers_the_runs_answer(api: Api, server: ScriptedModelServer
                                                   ) -> None:
    key = api.new_chat()
    server.push(Reply(text="Beds go on the south side."))
    sent = api.send(key, "Where do the beds go?")
    ended = wait(api, sent["run_id"], message="true")
    assert ended["status"] == "complete"
    message = ended["message"]
    assert message["kind"] == "assistant" and message["text"] == "Beds go on the south side."
    assert message["run_id"] == sent["run_id"]
    last = api.messages(key)[-1]
    assert message["index"] == last["index"] and message["id"] == last["id"]
    assert message["text"] == last["text"]


def test_wait_without_message_answers_no_message(api: Api, server: ScriptedModelServer
                                                 ) -> None:
    key = api.new_chat()
    server.push(Reply(text="plain"))
    run_id = api.send(key, "hi")["run_id"]
    assert "message" not in wait(api, run_id)
    assert "message" not in wait(api, run_id, message="false")
    assert wait(api, run_id, message="1")["message"]["text"] == "plain"


@pytest.mark.parametrize("value", ["maybe", "", "2", "yes please"])
def test_a_bad_message_value_is_the_error_envelope(api: Api, value: str) -> None:
    key = api.new_chat()
    run_id = api.send(key, "hi")["run_id"]
    error_of(api.http.get(f"/api/runs/{run_id}/wait", params={"timeout": 5, "message": value}),
             422)
    wait(api, run_id)


def test_a_run_that_wrote_no_answer_has_none(api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    server.push(Reply(status=400))
    sent = api.send(key, "hi")
    ended = wait(api, sent["run_id"], message="true")
    assert ended["status"] == "error" and ended["message"] is None
    done = replayed_done(api, key, int(sent["seq"]) - 1, sent["run_id"])
    assert done["answer_seq"] is None and done["answer"] is None


def test_the_live_done_frame_carries_the_answer(api: Api, server: ScriptedModelServer
                                                ) -> None:
    key = api.new_chat()
    release, started = threading.Event(), threading.Event()
    server.push(Reply(text="Held, then said.", hold=release, started=started))
    sent = api.send(key, "hold on")
    assert started.wait(10)
    frames: list[dict[str, Any]] = []
    with api.http.stream("GET", f"/api/sessions/{key}/events", params={"after": sent["seq"]},
                         timeout=20) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            frame = json.loads(line[6:])
            frames.append(frame)
            if frame["type"] == "status":
                release.set()  # the answer comes live, on this connection
            if frame["type"] == "done":
                break
    answers = [f for f in frames if f["type"] == "message" and f["message"]["kind"] == "assistant"]
    assert len(answers) == 1, frames
    done = frames[-1]
    assert done["run_id"] == sent["run_id"] and done["outcome"] == "complete"
    assert (done["answer_seq"], done["answer"]) == (answers[0]["seq"], "Held, then said.")


def test_the_replayed_done_frame_carries_the_answer(api: Api, server: ScriptedModelServer
                                                    ) -> None:
    key = api.new_chat()
    server.push(Reply(text="Said before you came."))
    sent = api.send(key, "hi")
    wait(api, sent["run_id"])
    done = replayed_done(api, key, int(sent["seq"]), sent["run_id"])
    assert done["answer"] == "Said before you came."
    assert done["answer_seq"] == api.messages(key)[-1]["index"]


def test_a_replay_after_the_answer_reads_it_from_the_store(api: Api, server: ScriptedModelServer
                                                           ) -> None:
    """A cut-off answer is kept (partial), then the ending's notice: a stream reconnecting
    after the partial answer replays only the notice and the done, which still carries the
    answer (read from the store, not from the page)."""
    key = api.new_chat()
    server.push(Reply(text="Half of what I meant to say", chunks=3, cut_after=2))
    sent = api.send(key, "hi")
    ended = wait(api, sent["run_id"], message="true")
    assert ended["ending"] == "cut_off", ended
    partial = ended["message"]
    assert partial is not None and partial["kind"] == "assistant", ended
    done = replayed_done(api, key, int(partial["index"]), sent["run_id"])
    assert (done["answer_seq"], done["answer"]) == (partial["index"], partial["text"])
