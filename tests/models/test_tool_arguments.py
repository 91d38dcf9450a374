"""A tool call's arguments as the adapters hand them on (`provider_common.tool_arguments`):
JSON objects parsed, anything else kept as `_invalid_json`, and every lone surrogate (a model
may send `\\ud800` as a JSON escape, which UTF-8 cannot carry) made U+FFFD, so a call whose
target holds one is saved, asked about and shown like any other (it failed the approval's
save before)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from hearth.models.provider_common import tool_arguments
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway


@pytest.mark.parametrize(("raw", "parsed"), [
    ('{"path": "a\\ud800b.md"}', {"path": "a\ufffdb.md"}),
    ('{"k\\udfff": ["\\ud83d\\ude00", {"x": "\\udc00"}]}', {"k\ufffd": ["😀", {"x": "\ufffd"}]}),
    ('{"path": "plain.md", "n": 3}', {"path": "plain.md", "n": 3}),
    ('["\\ud800"]', {"_invalid_json": '["\\ud800"]'}),
    ("not json \ud800", {"_invalid_json": "not json \ufffd"}),
    ("[" * 100_000, {"_invalid_json": "[" * 100_000}),  # deeper than Python walks
])
def test_arguments_are_valid_utf8_whatever_was_sent(raw: str, parsed: dict[str, Any]) -> None:
    arguments = tool_arguments(raw)
    assert arguments == parsed
    str(arguments).encode("utf-8")  # would raise on a lone surrogate


def _approval_of(api: Api, key: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = api.http.get("/api/approvals")
        assert listed.status_code == 200, listed.text
        for approval in listed.json()["approvals"]:
            if approval["session"] == key:
                return dict(approval)
        time.sleep(0.05)
    raise AssertionError("the call never waited on an approval")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_lone_surrogate_in_a_calls_target_is_saved_asked_and_shown(
        gateway_factory: Any, model_server: ScriptedModelServer, provider: str) -> None:
    url = model_server.anthropic_base_url if provider == "anthropic" else (
        model_server.openai_base_url)
    gateway: Gateway = gateway_factory(
        f'[[models]]\nid = "pick"\nprovider = "{provider}"\nbase_url = "{url}"\n'
        'api_key = "sk-test"\nmodel = "pick-model"\n\n[tools]\nprofile = "full"\n')
    api = gateway.client()
    key = api.new_chat(trust="ask", model="pick")
    raw = '{"path": "notes/a\\ud800b.md", "content": "hello"}'
    model_server.push(Reply(tool_calls=[Call("write_file", raw)]), Reply(text="Done."),
                      model="pick-model")
    run_id = api.send(key, "Write the note, please.")["run_id"]
    approval = _approval_of(api, key)
    assert approval["tool"] == "write_file" and approval["target"] == "notes/a\ufffdb.md"
    assert approval["arguments"]["path"] == "notes/a\ufffdb.md"
    page = api.http.get("/approvals")
    assert page.status_code == 200 and "notes/a\ufffdb.md" in page.text  # shown on its page
    allowed = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "allow_once"})
    assert allowed.status_code == 200, allowed.text
    assert api.wait(run_id)["status"] == "complete"
    (call,) = [m for m in api.messages(key) if m["kind"] == "tool_call"]
    assert call["content"]["arguments"]["path"] == "notes/a\ufffdb.md"
    written = gateway.home / "workspace" / "notes" / "a\ufffdb.md"
    assert written.read_text(encoding="utf-8") == "hello"
