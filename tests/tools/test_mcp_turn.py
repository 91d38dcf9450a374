"""MCP servers through a whole turn, end to end over HTTP: a gateway subprocess, the scripted
model server, and the REAL `mcp-server-time` and `mcp-server-git` from PyPI (no fakes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, kinds
from tests.support.approvals import pending_approvals

BIN = Path(sys.executable).parent
TIME_SERVER = str(BIN / "mcp-server-time")
GIT_SERVER = str(BIN / "mcp-server-git")
MISSING = "/nonexistent/bin/mcp-server-nowhere"
DENIED = "The owner denied this call, so it was not run. Carry on without it."
GIT = ["git", "-c", "user.name=Tester", "-c", "user.email=t@example.com"]

GatewayFactory = Callable[..., Gateway]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit on `main`."""
    folder = tmp_path / "repo"
    folder.mkdir()
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(folder)], check=True)
    (folder / "notes.txt").write_text("hello\n")
    subprocess.run([*GIT, "-C", str(folder), "add", "notes.txt"], check=True)
    subprocess.run([*GIT, "-C", str(folder), "commit", "-q", "-m", "Plant the first note"],
                   check=True)
    return folder


def mcp_config(repo: Path | None, *, broken: bool = False) -> str:
    """`[tools] profile = "full"` and the servers (git only with a repo); TOML basic strings
    are JSON strings here."""
    servers = [("time", TIME_SERVER, ["--local-timezone", "UTC"])]
    if repo is not None:
        servers.append(("git", GIT_SERVER, ["--repository", str(repo)]))
    if broken:
        servers.insert(0, ("broken", MISSING, []))
    text = '[tools]\nprofile = "full"\n'
    for name, command, args in servers:
        text += (f"\n[[mcp_servers]]\nname = {json.dumps(name)}\n"
                 f"command = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    return text


def offered(model_server: ScriptedModelServer, index: int = 0) -> set[str]:
    body = model_server.requests[index].body
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def run_view(api: Api, run_id: str) -> dict[str, Any]:
    answer = api.http.get(f"/api/runs/{run_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def tool_results(api: Api, key: str) -> list[dict[str, Any]]:
    return [m for m in api.messages(key) if m["kind"] == "tool_result"]


def branches(repo: Path) -> set[str]:
    out = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                         check=True, capture_output=True, text=True).stdout
    return set(out.split())


# ------------------------------------------------------------------ processes, via /proc


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # [state, ppid, ...]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _live(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def descendants(root: int) -> set[int]:
    """Live descendants of `root`."""
    stats = {int(p): st for p in os.listdir("/proc")
             if p.isdigit() and (st := _stat(int(p))) is not None}
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, st in stats.items()
                    if int(st[1]) in frontier and st[0] != "Z" and pid not in found}
        found |= frontier
    return found


def server_pids(gateway: Gateway) -> dict[str, set[int]]:
    """The gateway's descendant processes running each MCP server."""
    assert gateway.proc is not None
    family = descendants(gateway.proc.pid)
    return {name: {pid for pid in family if script in _cmdline(pid)}
            for name, script in (("time", TIME_SERVER), ("git", GIT_SERVER))}


# ------------------------------------------------------------------ the tests


def test_the_model_is_offered_the_mcp_tools_and_git_log_returns_the_commit(
        gateway_factory: GatewayFactory, model_server: ScriptedModelServer, repo: Path) -> None:
    api = gateway_factory(config=mcp_config(repo)).client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("git__git_log", {"repo_path": str(repo)})]),
                      Reply(text="One commit so far."))
    run_id = api.send(key, "what happened in the repo?")["run_id"]
    assert api.wait(run_id)["status"] == "complete"

    # The first model request already offers the MCP tools, beside the built-in ones.
    names = offered(model_server)
    assert {"time__get_current_time", "time__convert_time", "git__git_status", "git__git_log",
            "git__git_create_branch"} <= names
    assert {"read_file", "write_file", "shell"} <= names
    tools = {t["function"]["name"]: t["function"] for t in model_server.requests[0].body["tools"]}
    now = tools["time__get_current_time"]
    assert "timezone" in now["parameters"]["properties"]
    assert "(MCP server 'time')" in now["description"]

    # git_log ran on the real server and its answer reached the chat and the model.
    (result,) = tool_results(api, key)
    assert "Plant the first note" in result["text"] and result["content"]["is_error"] is False
    assert "Plant the first note" in model_server.requests[1].messages[-1]["content"]
    (call,) = run_view(api, run_id)["tool_calls"]
    assert (call["tool"], call["effect"], call["status"]) == ("git__git_log", "reads", "finished")


def test_a_read_only_mcp_tool_runs_without_asking_and_its_result_reaches_the_model(
        gateway_factory: GatewayFactory, model_server: ScriptedModelServer) -> None:
    api = gateway_factory(config=mcp_config(None)).client()
    key = api.new_chat(trust="ask")
    model_server.push(
        Reply(tool_calls=[Call("time__get_current_time", {"timezone": "UTC"}, id="call_now")]),
        Reply(text="It is noon."),
    )
    run_id = api.send(key, "what time is it?")["run_id"]
    assert api.wait(run_id)["status"] == "complete"
    years = (str(datetime.now(UTC).year - 1), str(datetime.now(UTC).year))  # asked just now

    assert kinds(api.messages(key)) == ["user", "tool_call", "tool_result", "assistant"]
    (result,) = tool_results(api, key)
    assert any(year in result["text"] for year in years), result["text"]
    assert "UTC" in result["text"] and result["content"]["is_error"] is False

    assert len(model_server.requests) == 2
    carried = model_server.requests[1].messages[-1]
    assert carried["role"] == "tool" and carried["tool_call_id"] == "call_now"
    assert carried["content"] == result["text"]

    run = run_view(api, run_id)
    assert run["status"] == "complete"
    assert run["tool_calls"] == [{
        "call_id": "call_now", "tool": "time__get_current_time", "effect": "reads",
        "status": "finished", "receipt": "Called time__get_current_time on the time server.",
    }]
    assert api.http.get("/api/approvals").json()["approvals"] == []  # nobody was asked


def test_a_changing_mcp_tool_waits_for_the_owner_deny_then_allow_once(
        gateway_factory: GatewayFactory, model_server: ScriptedModelServer, repo: Path) -> None:
    api = gateway_factory(config=mcp_config(repo)).client()
    key = api.new_chat(trust="ask")
    args = {"repo_path": str(repo), "branch_name": "feature-x"}

    # Denied: the model hears the denial, the turn completes, the branch is not created.
    model_server.push(Reply(tool_calls=[Call("git__git_create_branch", args, id="call_deny")]),
                      Reply(text="Fine, no branch."))
    first = api.send(key, "make a branch")["run_id"]
    [asked] = pending_approvals(api, timeout=20)
    assert (asked["tool"], asked["effect"], asked["status"]) == (
        "git__git_create_branch", "external", "pending")
    assert asked["arguments"] == args and asked["run_id"] == first
    assert asked["call_id"] == "call_deny"
    assert run_view(api, first)["status"] == "running"  # it waits; it did not run it
    assert branches(repo) == {"main"}
    answer = api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "deny"})
    assert answer.status_code == 200, answer.text
    assert api.wait(first)["status"] == "complete"
    assert branches(repo) == {"main"}
    (denied,) = tool_results(api, key)
    assert denied["text"] == DENIED and denied["content"]["is_error"] is True
    carried = model_server.requests[1].messages[-1]
    assert carried["role"] == "tool" and carried["content"] == DENIED
    (call,) = run_view(api, first)["tool_calls"]
    assert (call["tool"], call["effect"], call["status"]) == (
        "git__git_create_branch", "external", "denied")
    assert api.http.get("/api/approvals").json()["approvals"] == []
    again = api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "allow_once"})
    assert again.status_code == 409  # an answer is final

    # Allowed once: the same call runs and the branch exists.
    model_server.push(Reply(tool_calls=[Call("git__git_create_branch", args, id="call_allow")]),
                      Reply(text="Branch made."))
    second = api.send(key, "make it after all")["run_id"]
    [asked] = pending_approvals(api, timeout=20)
    assert (asked["tool"], asked["effect"], asked["call_id"]) == (
        "git__git_create_branch", "external", "call_allow")
    assert branches(repo) == {"main"}
    answer = api.http.post(f"/api/approvals/{asked['id']}", json={"decision": "allow_once"})
    assert answer.status_code == 200, answer.text
    assert api.wait(second)["status"] == "complete"
    assert branches(repo) == {"main", "feature-x"}
    made = tool_results(api, key)[-1]
    assert "Created branch 'feature-x'" in made["text"] and made["content"]["is_error"] is False
    assert "Created branch 'feature-x'" in model_server.requests[3].messages[-1]["content"]
    run = run_view(api, second)
    assert [(c["tool"], c["effect"], c["status"]) for c in run["tool_calls"]] == [
        ("git__git_create_branch", "external", "finished")]
    assert run["receipts"] == ["Called git__git_create_branch on the git server."]


def test_a_server_that_cannot_start_does_not_break_the_others(
        gateway_factory: GatewayFactory, model_server: ScriptedModelServer, repo: Path) -> None:
    gateway = gateway_factory(config=mcp_config(repo, broken=True))
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("time__get_current_time", {"timezone": "UTC"})]),
                      Reply(text="It is noon."))
    run_id = api.send(key, "what time is it?")["run_id"]
    assert api.wait(run_id)["status"] == "complete"
    names = offered(model_server)
    assert {"time__get_current_time", "git__git_status"} <= names
    assert not any(name.startswith("broken__") for name in names)
    (result,) = tool_results(api, key)
    assert result["content"]["is_error"] is False and "UTC" in result["text"]
    assert (f"MCP server broken: failed: The MCP server 'broken' could not start: "
            f"command '{MISSING}' was not found.") in gateway.output()


@pytest.mark.process_gateway  # its child processes, its exit
def test_servers_start_on_first_use_and_stopping_the_gateway_leaves_none_behind(
        gateway_factory: GatewayFactory, model_server: ScriptedModelServer, repo: Path) -> None:
    gateway = gateway_factory(config=mcp_config(repo))
    api = gateway.client()
    assert server_pids(gateway) == {"time": set(), "git": set()}  # nothing before a turn
    key = api.new_chat()
    model_server.push(Reply(text="Hello."))
    assert api.wait(api.send(key, "hi")["run_id"])["status"] == "complete"
    running = server_pids(gateway)
    assert running["time"] and running["git"], running
    assert any(str(repo) in _cmdline(pid) for pid in running["git"])

    gateway.stop()
    assert gateway.proc is not None  # uvicorn re-raises the SIGTERM it handled:
    assert gateway.proc.returncode in (0, -15), gateway.output()
    left = {pid for pids in running.values() for pid in pids if _live(pid)}
    assert not left, {pid: _cmdline(pid) for pid in left}
    strays = [pid for p in os.listdir("/proc")
              if p.isdigit() and _live(pid := int(p)) and str(repo) in _cmdline(pid)]
    assert not strays, {pid: _cmdline(pid) for pid in strays}
