"""Tool output is masked before it is kept or sent: a workspace file that holds the gateway's
token and a model's API key, read by the agent with `read_file` (or `cat` through the shell,
where bwrap runs), leaves neither in the transcript, the ledger's row or the next model
request, and the call's receipt says a secret was masked.

These tests fail on the code before tool output was masked in `engine.turn.toolbatch.run_call`:
the file's text was stored and sent as it was read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hearth.masking import REDACTED, mask
from hearth.tools.sandbox import bwrap_works
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import TOKEN, Gateway

MODEL_KEY = "qz-live-7Hc9Lp2Wm4Xr8Tb6Nv1Dk3"  # no known shape: masked because the gateway holds it
APP_TOKEN = "hearth_app_Q2b7xK9mW4pL8rT1vN6cY3hJ5dF0sG"  # an app's token: masked by its shape
SECRETS = (TOKEN, MODEL_KEY, APP_TOKEN)
FILE_TEXT = f"gateway {TOKEN}\nmodel {MODEL_KEY}\napp {APP_TOKEN}\nthe beds go south\n"
MASKED = "A secret in the output was masked."

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def _gateway(make: Callable[..., Gateway], model_server: ScriptedModelServer) -> Gateway:
    config = ('[[models]]\nid = "fake"\nprovider = "openai"\n'
              f'base_url = "{model_server.openai_base_url}"\napi_key = "{MODEL_KEY}"\n'
              'model = "fake-model"\n')
    gateway = make(config=config, model=False)
    (gateway.home / "workspace" / "keys.txt").write_text(FILE_TEXT, encoding="utf-8")
    return gateway


def _stored(home: Path, run_id: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The run's transcript events (content, meta) and ledger rows (result, receipt)."""
    with closing(sqlite3.connect(home / "hearth.db", timeout=30)) as db:
        events = db.execute("SELECT content, meta FROM transcript_events WHERE run_id = ?",
                            (run_id,)).fetchall()
        calls = db.execute("SELECT result, receipt FROM tool_calls WHERE run_id = ?",
                           (run_id,)).fetchall()
    return events, calls


def _assert_no_secret(where: str, text: Any) -> None:
    dumped = text if isinstance(text, str) else json.dumps(text)
    for secret in SECRETS:
        assert secret not in dumped, f"{secret!r} is in {where}"
        assert secret[:12] not in dumped, f"the head of {secret!r} is in {where}"


@pytest.mark.parametrize("call", [
    Call("read_file", {"path": "keys.txt"}, id="c1"),
    pytest.param(Call("shell", {"command": "cat keys.txt"}, id="c1"), marks=needs_bwrap),
], ids=["read_file", "shell_cat"])
def test_a_file_of_secrets_read_by_a_tool_is_kept_and_sent_masked(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        call: Call) -> None:
    gateway = _gateway(gateway_factory, model_server)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[call]), Reply(text="Read it."))
    run = api.wait(api.send(key, "what is in keys.txt?")["run_id"])
    assert run["status"] == "complete"
    events, calls = _stored(gateway.home, run["run_id"])
    _assert_no_secret("the transcript", events)
    _assert_no_secret("the ledger", calls)
    [ledger_call] = run["tool_calls"]
    assert ledger_call["status"] == "finished" and ledger_call["receipt"].endswith(MASKED)
    [(result, receipt)] = calls
    assert "the beds go south" in result and REDACTED in result and receipt.endswith(MASKED)
    _assert_no_secret("the chat's messages", api.messages(key))
    sent = model_server.requests[1]
    _assert_no_secret("the next model request", sent.body)
    tool_message = sent.messages[-1]
    assert tool_message["role"] == "tool" and REDACTED in tool_message["content"]
    assert "the beds go south" in tool_message["content"]


def test_an_agent_cli_s_call_answers_masked(gateway_factory: Callable[..., Gateway],
                                           model_server: ScriptedModelServer) -> None:
    """The `hearth mcp` path (`POST /api/sessions/{key}/tools/{name}`) runs the same call."""
    gateway = _gateway(gateway_factory, model_server)
    api = gateway.client()
    key = api.new_chat()
    answer = api.http.post(f"/api/sessions/{key}/tools/read_file",
                           json={"arguments": {"path": "keys.txt"}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    _assert_no_secret("the agent CLI's answer", body)
    assert REDACTED in body["output"] and body["receipt"].endswith(MASKED)
    _, calls = _stored(gateway.home, body["run_id"])
    _assert_no_secret("the ledger", calls)


def test_output_with_no_secret_keeps_its_receipt(gateway_factory: Callable[..., Gateway],
                                                 model_server: ScriptedModelServer) -> None:
    gateway = _gateway(gateway_factory, model_server)
    (gateway.home / "workspace" / "plain.txt").write_text("milk\n", encoding="utf-8")
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("read_file", {"path": "plain.txt"})]),
                      Reply(text="ok"))
    run = api.wait(api.send(key, "read")["run_id"])
    assert [c["receipt"] for c in run["tool_calls"]] == ["Read 5 bytes from plain.txt."]
    assert model_server.requests[1].messages[-1]["content"] == "milk\n"


def test_an_app_token_is_masked_by_its_shape() -> None:
    assert mask(f"token {APP_TOKEN}.") == f"token {REDACTED}."
    assert mask("hearth_app_ is the prefix") == "hearth_app_ is the prefix"
