"""/compact through the API, on a real gateway: refused with a sentence when there is nothing
to fold or the chat keeps nothing, and what the model reads next is the compacted view (the
compaction itself is tests/engine/test_compaction.py's)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import write_config
from tests.inprocess import InProcessGateway
from tests.support.compaction import OUTPUT, WINDOW, answer, ask, turn_requests


def test_compact_on_request_through_the_api(tmp_path: Path,
                                            model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    home = tmp_path / "home"
    write_config(home, model_server.openai_base_url,
                 f"context_window = {WINDOW}\nmax_output_tokens = {OUTPUT}\ntools = false\n")
    gateway = InProcessGateway(home).start()
    api = gateway.client()
    try:
        key = api.new_chat()
        early = api.http.post(f"/api/sessions/{key}/compact")
        for n in range(1, 6):
            api.wait(api.send(key, ask(n))["run_id"])
        done = api.http.post(f"/api/sessions/{key}/compact")
        incognito = api.new_chat(memory_mode="incognito")
        refused = api.http.post(f"/api/sessions/{incognito}/compact")
        said = [m["text"] for m in api.messages(key) if m["kind"] == "notice"]
        api.wait(api.send(key, ask(6))["run_id"])
    finally:
        api.http.close()
        gateway.kill()
    assert early.status_code == 200 and early.json()["compacted"] is False
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["compacted"] is True and body["freed_pct"] > 0
    assert body["sentence"].startswith("Conversation compacted: freed ")
    assert "you asked for it" in body["sentence"] and said == [body["sentence"]]
    assert refused.status_code == 409 and refused.json()["error"]["code"] == (
        "compact_keeps_nothing")
    last = turn_requests(model_server)[-1].messages
    asked = [m["content"] for m in last if m["role"] == "user"]
    assert asked[0] == ask(1) and asked[-1] == ask(6) and ask(2) not in asked
