"""`hearth mcp` end to end: a real gateway subprocess, and `hearth mcp --session KEY` as a real
subprocess spoken to by the SDK's own MCP client over stdio. No fakes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types as mcp_types
from mcp.shared.exceptions import MCPError

from hearth.client.mcp import CallAnswer, to_call_result, to_mcp_tool
from tests.gateway import TOKEN, Gateway
from tests.support.approvals import pending_approvals

pytestmark = pytest.mark.process_gateway  # `hearth mcp` with a gateway process (one killed)

GatewayFactory = Callable[..., Gateway]
T = TypeVar("T")


def server_env(gateway: Gateway) -> dict[str, str]:
    return {"HEARTH_HOME": str(gateway.home), "HEARTH_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}


def server_args(gateway: Gateway, key: str) -> list[str]:
    return ["-m", "hearth", "mcp", "--session", key, "--url", gateway.url]


def with_client(gateway: Gateway, key: str, errlog: Path,
                body: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Start `hearth mcp` for chat `key`, initialize an MCP session with it, run `body`."""
    params = StdioServerParameters(command=sys.executable, args=server_args(gateway, key),
                                   env=server_env(gateway))

    async def main() -> T:
        with errlog.open("a") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(asyncio.wait_for(main(), 60))


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))


def run_view(gateway: Gateway, run_id: str) -> dict[str, Any]:
    answer = gateway.client().http.get(f"/api/runs/{run_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_tools_are_listed_and_run_as_the_chat(gateway_factory: GatewayFactory,
                                              tmp_path: Path) -> None:
    gateway = gateway_factory(model=False)
    key = gateway.client().new_chat(trust="trusted")
    outside = tmp_path / "outside.txt"

    async def body(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        wrote = await session.call_tool("write_file",
                                        {"path": "notes/hello.txt", "content": "hi from MCP\n"})
        read = await session.call_tool("read_file", {"path": "notes/hello.txt"})
        refused = await session.call_tool("write_file", {"path": str(outside), "content": "x"})
        return {"tools": {t.name: t for t in listed.tools}, "wrote": wrote, "read": read,
                "refused": refused}

    got = with_client(gateway, key, tmp_path / "mcp.err", body)

    tools = got["tools"]
    assert {"read_file", "write_file"} <= set(tools)
    assert tools["read_file"].annotations.read_only_hint is True
    assert tools["write_file"].annotations.read_only_hint is False
    assert tools["write_file"].input_schema["required"] == ["path", "content"]

    wrote = got["wrote"]
    assert not wrote.is_error, text_of(wrote)
    assert (gateway.home / "workspace" / "notes" / "hello.txt").read_text() == "hi from MCP\n"
    run_id = wrote.meta["hearth/run_id"]
    receipt = wrote.meta["hearth/receipt"]
    assert receipt.startswith("Wrote ") and "notes/hello.txt" in receipt
    run = run_view(gateway, run_id)
    assert run["session"] == key and run["kind"] == "mcp" and run["status"] != "running"
    assert [(c["tool"], c["status"], c["receipt"]) for c in run["tool_calls"]] \
        == [("write_file", "finished", receipt)]
    assert run["receipts"] == [receipt]

    assert not got["read"].is_error
    assert "hi from MCP" in text_of(got["read"])

    refused = got["refused"]
    assert refused.is_error
    assert "it is outside the workspace" in text_of(refused)
    assert not outside.exists()


def test_a_denied_tool_is_not_listed_and_cannot_be_called(gateway_factory: GatewayFactory,
                                                          tmp_path: Path) -> None:
    gateway = gateway_factory(config='[tools]\ndeny = ["shell"]\n', model=False)
    key = gateway.client().new_chat(trust="trusted")

    async def body(session: ClientSession) -> tuple[set[str], mcp_types.CallToolResult]:
        names = {t.name for t in (await session.list_tools()).tools}
        denied = await session.call_tool("shell", {"command": "echo hi"})
        return names, denied

    names, denied = with_client(gateway, key, tmp_path / "mcp.err", body)
    assert "shell" not in names and "read_file" in names
    assert denied.is_error  # a tool of Hearth's that policy refuses: a tool error, saying why
    assert "403" in text_of(denied) and "shell is not available" in text_of(denied)


def test_an_unknown_tool_is_a_protocol_error_and_the_session_goes_on(
        gateway_factory: GatewayFactory, tmp_path: Path) -> None:
    gateway = gateway_factory(model=False)
    key = gateway.client().new_chat(trust="trusted")

    async def body(session: ClientSession) -> tuple[MCPError, mcp_types.CallToolResult]:
        try:
            await session.call_tool("no_such_tool", {"x": 1})
        except MCPError as error:  # JSON-RPC error -32602, not a result with isError
            refused = error
        else:
            raise AssertionError("an unknown tool was answered with a tool result")
        return refused, await session.call_tool("read_file", {"path": "missing.txt"})

    refused, failed = with_client(gateway, key, tmp_path / "mcp.err", body)
    assert refused.code == mcp_types.INVALID_PARAMS == -32602
    assert refused.message == "Unknown tool: no_such_tool"
    assert failed.is_error  # a known tool failing stays a tool result with isError
    assert "missing.txt" in text_of(failed)


def answer_approval(gateway: Gateway, decision: str, timeout: float = 20.0) -> dict[str, Any]:
    """Wait for the one pending approval and answer it as the owner."""
    api = gateway.client()
    pending = pending_approvals(api, timeout=timeout)
    assert len(pending) == 1, pending
    answer = api.http.post(f"/api/approvals/{pending[0]['id']}", json={"decision": decision})
    assert answer.status_code == 200, answer.text
    return dict(pending[0])


@pytest.mark.parametrize("decision", ["allow_once", "deny"])
def test_a_call_waits_for_the_owners_answer(gateway_factory: GatewayFactory, tmp_path: Path,
                                            decision: str) -> None:
    gateway = gateway_factory(model=False)
    key = gateway.client().new_chat(trust="ask")

    async def body(session: ClientSession) -> tuple[dict[str, Any], mcp_types.CallToolResult]:
        call = asyncio.create_task(
            session.call_tool("write_file", {"path": "asked.txt", "content": "ok\n"}))
        asked = await asyncio.to_thread(answer_approval, gateway, decision)
        return asked, await call

    asked, result = with_client(gateway, key, tmp_path / "mcp.err", body)
    written = gateway.home / "workspace" / "asked.txt"
    assert asked["tool"] == "write_file"
    if decision == "allow_once":
        assert not result.is_error, text_of(result)
        assert written.read_text() == "ok\n"
    else:
        assert result.is_error
        assert "denied" in text_of(result)
        assert not written.exists()


def test_a_gateway_gone_mid_session_is_a_tool_error(gateway_factory: GatewayFactory,
                                                    tmp_path: Path) -> None:
    gateway = gateway_factory(model=False)
    key = gateway.client().new_chat(trust="trusted")

    async def body(session: ClientSession) -> mcp_types.CallToolResult:
        await session.list_tools()
        gateway.kill()
        return await session.call_tool("read_file", {"path": "anything.txt"})

    result = with_client(gateway, key, tmp_path / "mcp.err", body)
    assert result.is_error
    assert "Cannot reach the Hearth gateway" in text_of(result)
    assert "hearth gateway" in text_of(result)


def run_server(gateway: Gateway, key: str,
               url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")}
    env.update(server_env(gateway))
    args = server_args(gateway, key)
    if url is not None:
        args[args.index("--url") + 1] = url
    return subprocess.run([sys.executable, *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def test_an_unknown_session_exits_2(gateway_factory: GatewayFactory) -> None:
    gateway = gateway_factory(model=False)
    done = run_server(gateway, "no-such-chat")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # stdout is for the MCP protocol only
    assert "There is no chat 'no-such-chat'" in done.stderr


def test_no_gateway_at_start_exits_3(gateway_factory: GatewayFactory) -> None:
    gateway = gateway_factory(model=False, start=False)
    done = run_server(gateway, "any-chat", url="http://127.0.0.1:9")
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert "Start it with `hearth gateway`" in done.stderr


@pytest.mark.parametrize(("effect", "read_only"),
                         [("reads", True), ("changes", False), ("external", False)])
def test_to_mcp_tool_marks_only_reads_as_read_only(effect: str, read_only: bool) -> None:
    tool = to_mcp_tool({"name": "t", "description": "d", "effect": effect,
                        "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}})
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is read_only
    assert tool.input_schema["properties"] == {"a": {"type": "string"}}


def test_a_failed_call_is_an_mcp_tool_error() -> None:
    result = to_call_result(CallAnswer(output="Refused: no.", ok=False, receipt="", run_id="r1"))
    assert result.is_error is True
    assert text_of(result) == "Refused: no."
    assert result.meta == {"hearth/run_id": "r1", "hearth/receipt": ""}
