"""The MCP client against real servers: mcp-server-time and mcp-server-git over stdio (from PyPI),
and a tiny MCPServer (the SDK's FastMCP) over streamable HTTP in a subprocess. No fakes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import types as mcp_types

from hearth.config import McpServerConfig
from hearth.tools.base import ToolContext, ToolOutcome, ToolRefused
from hearth.tools.mcp_client import McpServers
from hearth.tools.mcp_tools import McpTool, render_result, tool_name
from tests.gateway import free_port

BIN = Path(sys.executable).parent


def time_server(**extra: Any) -> McpServerConfig:
    return McpServerConfig(
        name="time", command=str(BIN / "mcp-server-time"), args=["--local-timezone", "UTC"],
        **extra,
    )


def git_server(repo: Path) -> McpServerConfig:
    return McpServerConfig(
        name="git", command=str(BIN / "mcp-server-git"), args=["--repository", str(repo)]
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git = ["git", "-c", "user.name=Tester", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(folder)], check=True)
    (folder / "notes.txt").write_text("hello\n")
    subprocess.run([*git, "-C", str(folder), "add", "notes.txt"], check=True)
    subprocess.run([*git, "-C", str(folder), "commit", "-q", "-m", "Plant the first note"],
                   check=True)
    return folder


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="k", run_id="r")


# ------------------------------------------------------------------ processes, via /proc


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # [state, ppid, pgrp, session, ...]


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(root: int | None = None) -> set[int]:
    """Live (non-zombie) descendants of this test process."""
    stats = {pid: st for pid in _all_pids() if (st := _stat(pid)) is not None}
    found: set[int] = set()
    frontier = {root or os.getpid()}
    while frontier:
        children = {pid for pid, st in stats.items()
                    if int(st[1]) in frontier and st[0] != "Z" and pid not in found}
        found |= children
        frontier = children
    return found


def alive_in_sessions(sessions: set[int]) -> set[int]:
    """Processes still alive in the sessions the servers were started in (grandchildren too)."""
    return {pid for pid in _all_pids()
            if (st := _stat(pid)) is not None and st[0] != "Z" and int(st[3]) in sessions}


def pid_running(marker: str, among: set[int]) -> int:
    for pid in among:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        except OSError:
            continue
        if marker in cmdline:
            return pid
    raise AssertionError(f"no child process runs {marker!r}")


def child_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def run_call(outcome: ToolOutcome) -> ToolOutcome:
    assert outcome.receipt.endswith(".") and outcome.receipt.count(". ") == 0
    return outcome


# ------------------------------------------------------------------ pure parts


def test_tool_names_are_namespaced_and_sanitised() -> None:
    assert tool_name("time", "get_current_time") == "time__get_current_time"
    assert tool_name("web", "fetch.page v2") == "web__fetch_page_v2"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("server__xxx")


def test_images_and_resources_are_summarised_in_one_line_each() -> None:
    result = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(type="text", text="first"),
        mcp_types.ImageContent(type="image", data="aGVsbG8gd29ybGQ=", mime_type="image/png"),
        mcp_types.EmbeddedResource(type="resource", resource=mcp_types.TextResourceContents(
            uri="file:///a.txt", mime_type="text/plain", text="a" * 40)),
        mcp_types.TextContent(type="text", text="last"),
    ])
    assert render_result(result).splitlines() == [
        "first", "[image: image/png, 12 bytes]",
        "[resource file:///a.txt: 40 characters of text/plain]", "last",
    ]


# ------------------------------------------------------------------ real stdio servers


def test_real_stdio_servers_list_call_and_stop(repo: Path, ctx: ToolContext,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HEARTH_TOKEN", "token-must-not-leak")
    before = descendants()
    servers = McpServers([
        time_server(env={"HEARTH_MCP_MARK": "passed"}),
        git_server(repo),
        McpServerConfig(name="gitx", command="mcp-server-gitx"),
    ])
    assert servers.status() == {"time": "not started", "git": "not started",
                                "gitx": "not started"}
    assert descendants() == before  # nothing starts until it is needed

    async def scenario() -> set[int]:
        tools = {tool.name: tool for tool in await servers.tools()}
        assert {"time__get_current_time", "time__convert_time", "git__git_status",
                "git__git_log", "git__git_commit"} <= set(tools)
        assert all(isinstance(tool, McpTool) for tool in tools.values())
        assert not any(name.startswith("gitx__") for name in tools)

        # What the real servers declare: every time tool and git's inspection tools are
        # readOnlyHint true; git's commit/add/reset/branch/checkout are readOnlyHint false.
        assert {n: t.effect for n, t in tools.items() if n.startswith("time__")} == {
            "time__get_current_time": "reads", "time__convert_time": "reads"}
        for name in ("git__git_status", "git__git_log", "git__git_diff", "git__git_show"):
            assert tools[name].effect == "reads" and tools[name].parallel_safe
        for name in ("git__git_commit", "git__git_add", "git__git_reset", "git__git_checkout"):
            assert tools[name].effect == "external" and not tools[name].parallel_safe
        now = tools["time__get_current_time"]
        assert "timezone" in now.parameters["properties"] and now.description

        status = servers.status()
        assert status["time"] == "ready" and status["git"] == "ready"
        assert status["gitx"] == ("failed: The MCP server 'gitx' could not start: "
                                  "command 'mcp-server-gitx' was not found.")

        year = datetime.now(UTC).year
        got = run_call(await now.run({"timezone": "UTC"}, ctx))
        assert got.ok and (str(year) in got.output or str(year + 1) in got.output)
        assert got.receipt == "Called time__get_current_time on the time server."

        got = run_call(await tools["git__git_status"].run({"repo_path": str(repo)}, ctx))
        assert got.ok and "On branch" in got.output and "working tree clean" in got.output
        got = run_call(await tools["git__git_log"].run({"repo_path": str(repo)}, ctx))
        assert got.ok and "Plant the first note" in got.output

        # The server's own errors come back as ok=False with its words.
        got = run_call(await now.run({"timezone": "Mars/Olympus_Mons"}, ctx))
        assert not got.ok and "Invalid timezone" in got.output and "Mars/Olympus_Mons" in got.output
        got = run_call(await tools["git__git_status"].run({"repo_path": "/"}, ctx))
        assert not got.ok and "outside the allowed repository" in got.output
        got = await servers.call("time", "no_such_tool", {})
        assert not got.ok and "Unknown tool: no_such_tool" in got.output

        with pytest.raises(ToolRefused) as refused:
            await servers.call("gitx", "git_status", {"repo_path": str(repo)})
        assert refused.value.sentence == status["gitx"].removeprefix("failed: ")

        # A stdio server gets PATH/HOME/LANG and its own env, never the gateway's secrets.
        started = descendants() - before
        env = child_environ(pid_running("mcp-server-time", started))
        assert env.get("HEARTH_MCP_MARK") == "passed"
        assert "OPENAI_API_KEY" not in env and "HEARTH_TOKEN" not in env
        assert env.get("PATH") == os.environ["PATH"]

        await servers.close()
        return started

    started = asyncio.run(scenario())
    assert len(started) >= 2
    assert descendants() == before, "a server process outlived close()"
    assert not alive_in_sessions(started)
    assert servers.status()["time"] == "not started"


def test_a_killed_server_is_restarted_once_on_the_next_call(ctx: ToolContext) -> None:
    before = descendants()
    servers = McpServers([time_server()])

    def kill_time_server() -> None:
        os.kill(pid_running("mcp-server-time", descendants() - before), signal.SIGKILL)

    async def wait_for_failure() -> str:
        deadline = time.monotonic() + 10
        while (status := servers.status()["time"]) in ("ready", "stopping"):
            assert time.monotonic() < deadline, "the death was not noticed"
            await asyncio.sleep(0.05)
        return status

    async def scenario() -> None:
        (now,) = [t for t in await servers.tools() if t.name == "time__get_current_time"]
        assert (await now.run({"timezone": "UTC"}, ctx)).ok

        kill_time_server()
        status = await wait_for_failure()
        assert status == ("failed: The MCP server 'time' stopped unexpectedly; "
                          "it will be restarted on the next call.")
        got = await now.run({"timezone": "UTC"}, ctx)
        assert got.ok and servers.status()["time"] == "ready"

        # Restarted once more (it served a call since); a restart that dies again before
        # serving anything is not restarted again.
        kill_time_server()
        await wait_for_failure()
        assert [t.name for t in await servers.tools()]  # the one restart
        kill_time_server()
        status = await wait_for_failure()
        assert "stopped again after its restart" in status
        with pytest.raises(ToolRefused) as refused:
            await now.run({"timezone": "UTC"}, ctx)
        assert refused.value.sentence == status.removeprefix("failed: ")
        await servers.close()

    asyncio.run(scenario())
    assert descendants() == before


def test_servers_that_cannot_start_are_said_in_a_sentence(tmp_path: Path) -> None:
    before = descendants()
    port = free_port()
    servers = McpServers([
        McpServerConfig(name="mute", command=sys.executable,
                        args=["-c", "import time; time.sleep(60)"]),
        McpServerConfig(name="quits", command=sys.executable, args=[
            "-c", "import sys; sys.stderr.write('boom: no settings file\\n'); sys.exit(3)"]),
        McpServerConfig(name="away", url=f"http://127.0.0.1:{port}/mcp"),
        McpServerConfig(name="blank"),
    ], start_timeout=1.0)

    async def scenario() -> None:
        assert await servers.tools() == []  # tools() does not raise for any of them
        status = servers.status()
        assert status["mute"] == ("failed: The MCP server 'mute' could not start: it did not "
                                  "finish its start-up handshake within 1 second.")
        assert status["quits"] == ("failed: The MCP server 'quits' could not start: it exited "
                                   "during start-up: boom: no settings file.")
        assert status["away"].startswith(
            f"failed: The MCP server 'away' could not start: http://127.0.0.1:{port}/mcp "
            "could not be reached (")
        assert status["blank"] == ("failed: The MCP server 'blank' could not start: its "
                                   "configuration has neither a command nor a url.")
        for name in ("mute", "quits", "away", "blank"):
            with pytest.raises(ToolRefused) as refused:
                await servers.call(name, "anything", {})
            assert refused.value.sentence == status[name].removeprefix("failed: ")
        await servers.close()

    asyncio.run(scenario())
    assert descendants() == before


# ------------------------------------------------------------------ streamable HTTP

HTTP_SERVER = '''
import asyncio
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("echo")


@server.tool(description="Say the text back in capitals.",
             annotations=ToolAnnotations(read_only_hint=True))
def shout(text: str) -> str:
    return text.upper() + "!"


@server.tool(description="Wait a while, then say so.")
async def nap(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "rested"


server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
'''


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    script = tmp_path / "echo_server.py"
    script.write_text(HTTP_SERVER)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, "the HTTP MCP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP MCP server did not listen"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_streamable_http_server(http_server: str, ctx: ToolContext) -> None:
    servers = McpServers([McpServerConfig(name="echo", url=http_server)])

    async def scenario() -> None:
        tools = {tool.name: tool for tool in await servers.tools()}
        assert set(tools) == {"echo__shout", "echo__nap"}
        assert tools["echo__shout"].effect == "reads" and tools["echo__shout"].parallel_safe
        assert tools["echo__nap"].effect == "external" and not tools["echo__nap"].parallel_safe
        got = run_call(await tools["echo__shout"].run({"text": "hello"}, ctx))
        assert got == ToolOutcome("HELLO!", "Called echo__shout on the echo server.", ok=True)

        got = run_call(await servers.call("echo", "nap", {"seconds": 5}, timeout=0.3))
        assert not got.ok
        assert got.output == "echo__nap did not answer within 0.3 seconds; the call was cancelled."

        # A caller that is cancelled takes its call with it; the session stays usable.
        task = asyncio.create_task(servers.call("echo", "nap", {"seconds": 5}))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        started = time.monotonic()
        got = await tools["echo__shout"].run({"text": "still here"}, ctx)
        assert got.ok and got.output == "STILL HERE!" and time.monotonic() - started < 2

        got = await tools["echo__shout"].run({}, ctx)  # a bad argument: the server says so
        assert not got.ok and "text" in got.output and "required" in got.output.lower()
        assert servers.status() == {"echo": "ready"}
        await servers.close()
        assert servers.status() == {"echo": "not started"}
        with pytest.raises(ToolRefused):
            await servers.call("echo", "shout", {"text": "late"})

    asyncio.run(scenario())
