"""End to end over HTTP: a gateway subprocess, the scripted model server, real SDK calls."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway, kinds


def test_a_message_is_answered_streamed_and_kept(gateway: Gateway,
                                                 model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Hello there, friend.", chunks=4))
    admitted = api.send(key, "hi")
    assert admitted["status"] == "started"
    frames = api.frames(key, after=0, until=lambda f: f["type"] == "done")
    deltas = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert deltas == "Hello there, friend."
    done = frames[-1]
    assert done["run_id"] == admitted["run_id"] and done["outcome"] == "complete"
    messages = api.messages(key)
    assert kinds(messages) == ["user", "assistant"]
    telemetry = messages[-1]["meta"]["turn_telemetry"]
    assert telemetry["model_id"] == "fake" and telemetry["tokens_in"] == 10
    assert telemetry["tool_calls"] == 0 and telemetry["duration_ms"] >= 0
    # what the model was handed: the system prompt, then the user's message
    sent = model_server.requests[0].messages
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "hi"}


def test_tools_run_in_the_workspace_with_receipts(gateway: Gateway,
                                                  model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(
        Reply(tool_calls=[Call("write_file", {"path": "notes/todo.md", "content": "milk\n"})]),
        Reply(tool_calls=[Call("read_file", {"path": "notes/todo.md"})]),
        Reply(text="Saved your list."),
    )
    run = api.wait(api.send(key, "remember milk")["run_id"])
    assert run["status"] == "complete"
    assert (gateway.home / "workspace" / "notes" / "todo.md").read_text() == "milk\n"
    assert [c["status"] for c in run["tool_calls"]] == ["finished", "finished"]
    assert run["receipts"] == ["Wrote 5 bytes to notes/todo.md."]
    third = model_server.requests[2].messages
    assert third[-1]["role"] == "tool" and third[-1]["content"] == "milk\n"
    assert kinds(api.messages(key)) == [
        "user", "tool_call", "tool_result", "tool_call", "tool_result", "assistant"]


def test_an_anthropic_model_answers_a_turn_with_a_tool_call(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    config = (
        '[[models]]\nid = "claude"\nprovider = "anthropic"\n'
        f'base_url = "{model_server.anthropic_base_url}"\napi_key = "sk-ant-test"\n'
        'model = "claude-test"\n'
    )
    gateway = gateway_factory(config=config, model=False)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(
        Reply(tool_calls=[Call("write_file", {"path": "from-claude.txt", "content": "hi"})]),
        Reply(text="Done, via Claude."),
    )
    run = api.wait(api.send(key, "write it")["run_id"])
    assert run["status"] == "complete" and run["model"] == "claude"
    assert (gateway.home / "workspace" / "from-claude.txt").read_text() == "hi"
    first, second = model_server.requests
    assert first.path == second.path == "/v1/messages"
    assert first.body["system"] and first.body["messages"][-1]["role"] == "user"
    results = second.body["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and "Wrote 2 bytes" in results[0]["content"]
    telemetry = api.messages(key)[-1]["meta"]["turn_telemetry"]
    assert telemetry["provider"] == "anthropic" and telemetry["model"] == "claude-test"
