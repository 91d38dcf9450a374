"""Tool policy: each layer of `judge`/`explain` (profile, allow, deny, per agent, patterns),
what a turn offers the model and refuses, `may_use_mcp`, and `hearth tools explain`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.config import Config
from hearth.engine.runtime import Engine
from hearth.sessions import chats
from hearth.store import ledger
from hearth.store.schema import audit
from hearth.tools import policy
from hearth.tools.registry import builtin_tools
from hearth.tools.sandbox import placement
from tests.engine_harness import make_config, make_engine, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

MEMORY_TOOLS = ["memory_remember", "memory_recall", "memory_list", "memory_forget", "chat_search"]
JOB_TOOLS = ["schedule_job", "spawn_helpers", "open_attachment"]  # the engine's own tools
BUILTIN = sorted([*(t.name for t in builtin_tools()), *MEMORY_TOOLS, *JOB_TOOLS])
MINIMAL = {"read_file", "list_dir", "glob", "grep", "memory_recall", "memory_list", "chat_search",
           "open_attachment"}
CODING = MINIMAL | {"write_file", "edit_file", "shell", "memory_remember", "memory_forget",
                    "schedule_job", "spawn_helpers"}
EVERY = [*BUILTIN, "time__now", "files__read"]  # two MCP servers' tools among the built-ins


def config(**raw: Any) -> Config:
    return Config.model_validate(raw)


def with_time_server(**raw: Any) -> Config:
    """A config with one MCP server, `time`, whose tools are named time__<tool>."""
    return Config.model_validate({**raw, "mcp_servers": [{"name": "time", "command": "x"}]})


def reasons(cfg: Config, agent: str = "default") -> dict[str, tuple[bool, str]]:
    return {v.tool: (v.allowed, v.reason) for v in policy.explain(EVERY, cfg, agent)}


def test_builtin_tools_are_the_ones_these_tests_expect() -> None:
    assert set(BUILTIN) == CODING | {"web_fetch"}


@pytest.mark.parametrize(("profile", "members"), [
    ("minimal", MINIMAL),
    ("coding", CODING),
    ("full", set(EVERY)),
])
def test_each_profile_has_exactly_its_members(profile: str, members: set[str]) -> None:
    cfg = config(tools={"profile": profile})
    assert policy.allowed(EVERY, cfg, "default") == members
    for tool, (ok, reason) in reasons(cfg).items():
        assert ok == (tool in members)
        expected = f"in the {profile!r} profile" if ok else f"not in the {profile!r} profile"
        assert reason == expected


def test_no_tools_section_means_the_coding_profile() -> None:
    assert policy.allowed(EVERY, config(), "default") == CODING
    assert policy.judge("web_fetch", config(), "default").reason == "not in the 'coding' profile"


def test_a_global_allow_list_narrows_the_profile_and_says_which_entry_let_a_tool_in() -> None:
    cfg = config(tools={"profile": "coding", "allow": ["read_*", "shell", "web_fetch"]})
    assert policy.allowed(EVERY, cfg, "default") == {"read_file", "shell"}
    got = reasons(cfg)
    assert got["read_file"] == (True, "in the 'coding' profile, allowed by tools.allow ('read_*')")
    assert got["shell"] == (True, "in the 'coding' profile, allowed by tools.allow ('shell')")
    assert got["list_dir"] == (False, "not named by tools.allow")
    # an allow list narrows, never widens: web_fetch is not in the coding profile
    assert got["web_fetch"] == (False, "not in the 'coding' profile")


def test_allow_entries_match_whole_names_not_prefixes() -> None:
    cfg = config(tools={"allow": ["read", "grep"]})
    assert policy.allowed(EVERY, cfg, "default") == {"grep"}
    cfg = config(tools={"deny": ["read", "gre"]})
    assert policy.allowed(EVERY, cfg, "default") == CODING


def test_a_global_deny_removes_a_tool_and_wins_over_allow_and_the_profile() -> None:
    cfg = config(tools={"profile": "full", "allow": ["shell", "read_file", "web_*"],
                        "deny": ["shell", "web_*"]})
    assert policy.allowed(EVERY, cfg, "default") == {"read_file"}
    got = reasons(cfg)
    assert got["shell"] == (False, "denied by tools.deny ('shell')")
    assert got["web_fetch"] == (False, "denied by tools.deny ('web_*')")
    # deny is said even where the profile would have kept the tool out anyway
    minimal = config(tools={"profile": "minimal", "deny": ["shell"]})
    assert policy.judge("shell", minimal, "default").reason == "denied by tools.deny ('shell')"


def test_a_per_agent_profile_replaces_the_global_one() -> None:
    cfg = config(tools={"profile": "minimal"},
                 agents={"coder": {"tools": {"profile": "full"}},
                         "reader": {"tools": {}}})
    assert policy.allowed(EVERY, cfg, "coder") == set(EVERY)
    assert policy.judge("shell", cfg, "coder").reason == "in the 'full' profile"
    # an agent that sets no profile of its own has the global one
    assert policy.allowed(EVERY, cfg, "reader") == MINIMAL
    narrower = config(tools={"profile": "full"}, agents={"x": {"tools": {"profile": "minimal"}}})
    assert policy.allowed(EVERY, narrower, "x") == MINIMAL
    assert policy.judge("web_fetch", narrower, "x").reason == "not in the 'minimal' profile"


def test_a_per_agent_allow_list_narrows_further_and_cannot_widen_the_global_one() -> None:
    cfg = config(tools={"allow": ["read_file", "grep", "list_dir"]},
                 agents={"x": {"tools": {"allow": ["grep", "shell", "list_*"]}}})
    assert policy.allowed(EVERY, cfg, "x") == {"grep", "list_dir"}
    got = reasons(cfg, "x")
    assert got["grep"] == (True, "in the 'coding' profile, allowed by tools.allow ('grep'), "
                                 "allowed by agents.x.tools.allow ('grep')")
    assert got["read_file"] == (False, "not named by agents.x.tools.allow")
    assert got["shell"] == (False, "not named by tools.allow")  # the global list speaks first
    # the other agents keep the global allow list only
    assert policy.allowed(EVERY, cfg, "default") == {"read_file", "grep", "list_dir"}


def test_a_per_agent_deny_wins_over_every_allow_and_touches_no_other_agent() -> None:
    cfg = config(tools={"profile": "full", "allow": ["read_*", "grep", "shell"]},
                 agents={"x": {"tools": {"allow": ["read_file", "shell"], "deny": ["read_*"]}}})
    assert policy.allowed(EVERY, cfg, "x") == {"shell"}
    assert reasons(cfg, "x")["read_file"] == (False, "denied by agents.x.tools.deny ('read_*')")
    assert policy.allowed(EVERY, cfg, "default") == {"read_file", "grep", "shell"}
    both = config(tools={"deny": ["shell"]}, agents={"x": {"tools": {"deny": ["sh*"]}}})
    assert policy.judge("shell", both, "x").reason == "denied by tools.deny ('shell')"


def test_patterns_name_an_mcp_servers_tools_and_families_of_tools() -> None:
    cfg = config(tools={"profile": "full", "allow": ["time__*", "read_*"]})
    assert policy.allowed(EVERY, cfg, "default") == {"time__now", "read_file"}
    assert reasons(cfg)["time__now"] == (
        True, "in the 'full' profile, allowed by tools.allow ('time__*')")
    assert reasons(cfg)["files__read"] == (False, "not named by tools.allow")
    denied = config(tools={"profile": "full", "deny": ["*__*"]})
    assert policy.allowed(EVERY, denied, "default") == set(BUILTIN)
    assert reasons(denied)["time__now"] == (False, "denied by tools.deny ('*__*')")


def test_an_agent_that_is_not_configured_gets_the_global_policy() -> None:
    cfg = config(tools={"profile": "coding", "allow": ["read_file", "shell"], "deny": ["shell"]},
                 agents={"other": {"tools": {"profile": "full"}}})
    assert policy.explain(EVERY, cfg, "stranger") == policy.explain(EVERY, cfg, "default")
    assert policy.allowed(EVERY, cfg, "stranger") == {"read_file"}


def test_explain_covers_every_tool_once_in_name_order() -> None:
    verdicts = policy.explain(reversed(EVERY), config(), "default")
    assert [v.tool for v in verdicts] == sorted(EVERY)


# -- may_use_mcp --------------------------------------------------------------------------

def test_may_use_mcp_only_when_the_policy_can_let_an_mcp_tool_in() -> None:
    assert not policy.may_use_mcp(config(tools={"profile": "full"}), "default")  # no servers
    assert policy.may_use_mcp(with_time_server(tools={"profile": "full"}), "default")
    assert not policy.may_use_mcp(with_time_server(), "default")  # coding
    assert not policy.may_use_mcp(with_time_server(tools={"profile": "minimal"}), "default")
    per_agent = with_time_server(tools={"profile": "coding"},
                       agents={"mcp": {"tools": {"profile": "full"}},
                               "plain": {"tools": {"profile": "minimal"}}})
    assert policy.may_use_mcp(per_agent, "mcp")
    assert not policy.may_use_mcp(per_agent, "plain")
    assert not policy.may_use_mcp(per_agent, "stranger")
    narrowed = with_time_server(tools={"profile": "full"},
                                agents={"x": {"tools": {"profile": "minimal"}}})
    assert not policy.may_use_mcp(narrowed, "x")
    assert policy.may_use_mcp(narrowed, "default")


@pytest.mark.parametrize("raw", [
    {"tools": {"profile": "full"}},
    {"tools": {"profile": "full", "allow": ["time__*"]}},
    {"tools": {"profile": "coding"}, "agents": {"x": {"tools": {"profile": "full"}}}},
])
def test_may_use_mcp_is_true_whenever_judge_lets_an_mcp_tool_in(raw: dict[str, Any]) -> None:
    cfg = with_time_server(**raw)
    for agent in ("default", "x"):
        if policy.judge("time__now", cfg, agent).allowed:
            assert policy.may_use_mcp(cfg, agent)


@pytest.mark.parametrize("raw", [
    {"tools": {"profile": "coding", "allow": ["time__*", "read_file"]}},
    {"tools": {"profile": "full", "allow": ["read_file"]}},
    {"tools": {"profile": "full", "deny": ["*__*"]}},
])
def test_may_use_mcp_is_false_when_the_policy_refuses_every_mcp_tool(raw: dict[str, Any]) -> None:
    cfg = with_time_server(**raw)
    assert not policy.judge("time__now", cfg, "default").allowed
    assert not policy.may_use_mcp(cfg, "default")


# -- a turn in this process: offered tools, refused calls ----------------------------------

def offered_names(server: ScriptedModelServer, index: int = 0) -> set[str]:
    return {spec["function"]["name"] for spec in server.requests[index].body.get("tools", [])}


def chat_turn(engine: Engine, text: str, agent: str | None = None) -> dict[str, Any]:
    async def body() -> dict[str, Any]:
        await engine.start()
        try:
            key = (await chats.open_chat(engine.db, agent=agent, trust="trusted")).session.key
            return await turn(engine, key, text)
        finally:
            await engine.close()

    result: dict[str, Any] = asyncio.run(body())
    return result


def test_the_model_is_offered_exactly_the_tools_the_policy_allows(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    cfg = make_config(model_server.openai_base_url, tools={"profile": "minimal"})
    model_server.push(Reply(text="hi"))
    chat_turn(make_engine(tmp_path, cfg), "hello")
    assert offered_names(model_server) == MINIMAL


def test_the_offer_follows_the_chats_agent(tmp_path: Path,
                                           model_server: ScriptedModelServer) -> None:
    cfg = make_config(model_server.openai_base_url,
                      tools={"profile": "minimal", "deny": ["grep"]},
                      agents={"builder": {"tools": {"profile": "full", "deny": ["web_*"]}}})
    model_server.push(Reply(text="one"), Reply(text="two"))
    chat_turn(make_engine(tmp_path, cfg), "hello", agent="builder")
    assert offered_names(model_server, 0) == CODING - {"grep"}  # full, less both deny lists
    second = tmp_path / "second"
    second.mkdir()
    chat_turn(make_engine(second, cfg), "hello")  # the default agent
    assert offered_names(model_server, 1) == MINIMAL - {"grep"}


def test_a_call_to_a_denied_tool_is_refused_never_runs_and_is_audited(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    cfg = make_config(model_server.openai_base_url, tools={"profile": "minimal"})
    engine = make_engine(tmp_path, cfg)
    target = tmp_path / "workspace" / "pwned.txt"
    model_server.push(
        Reply(tool_calls=[Call("write_file", {"path": "pwned.txt", "content": "x"}, id="c1")]),
        Reply(text="done"))
    view = chat_turn(engine, "write it")
    assert view["status"] == "complete", view
    assert not target.exists()
    sentence = ("write_file is not available to this agent (not in the 'minimal' profile), "
                "so it was not run.")
    results = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in results] == [sentence]
    with engine.db.read() as conn:
        rows = conn.execute(select(audit).where(audit.c.action == "tool.refused")).all()
        calls = ledger.for_run(conn, view["run_id"])
    assert len(rows) == 1
    assert rows[0].actor == "policy" and rows[0].run_id == view["run_id"]
    assert rows[0].detail["tool"] == "write_file" and rows[0].detail["call_id"] == "c1"
    assert rows[0].detail["reason"] == "not in the 'minimal' profile"
    assert rows[0].detail["target"] == "pwned.txt"
    assert calls == []  # never recorded as started: it never ran


# -- hearth tools explain ------------------------------------------------------------------

def hearth(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")}
    env["HEARTH_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "hearth", *args], env=env, capture_output=True,
                          text=True, timeout=30, check=False)


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


EXPLAINED = """
[tools]
profile = "coding"
deny = ["shell"]
sandbox = "off"
elevated = true

[agents.x.tools]
profile = "full"
allow = ["read_*", "grep", "shell", "time__*"]

[[mcp_servers]]
name = "time"
command = "true"

[[mcp_servers]]
name = "files"
command = "true"
"""


def explained(stdout: str) -> dict[str, tuple[str, str]]:
    lines = [line for line in stdout.splitlines() if line[:2] in ("+ ", "- ")]
    return {line.split()[1]: (line[0], line.split(maxsplit=2)[2]) for line in lines}


def test_tools_explain_prints_each_tool_in_or_out_with_its_reason(home: Path) -> None:
    write_config(home, EXPLAINED)
    done = hearth(home, "tools", "explain", "--agent", "x")
    assert done.returncode == 0, done.stderr
    got = explained(done.stdout)
    assert set(got) == {*BUILTIN, "time__*", "files__*"}
    assert got["read_file"] == (
        "+", "in the 'full' profile, allowed by agents.x.tools.allow ('read_*')")
    assert got["grep"] == ("+", "in the 'full' profile, allowed by agents.x.tools.allow ('grep')")
    assert got["shell"] == ("-", "denied by tools.deny ('shell')")
    assert got["list_dir"] == ("-", "not named by agents.x.tools.allow")
    assert got["web_fetch"] == ("-", "not named by agents.x.tools.allow")
    assert got["time__*"][0] == "+"
    assert got["time__*"][1].startswith("in the 'full' profile, allowed by agents.x.tools.allow "
                                        "('time__*') (MCP server 'time';")
    assert got["files__*"][0] == "-"
    assert got["files__*"][1].startswith("not named by agents.x.tools.allow (MCP server 'files';")
    assert done.stdout.splitlines()[-1] == (
        'shell placement: off: NOT sandboxed: [tools] sandbox = "off" in config.toml; every shell '
        "command is asked, and Incognito and Temporary chats have no shell, elevated runs allowed")


def test_tools_explain_without_an_agent_is_the_global_policy_and_its_placement(
        home: Path) -> None:
    write_config(home, EXPLAINED.replace('sandbox = "off"\nelevated = true',
                                         'sandbox = "auto"\nnetwork = true'))
    done = hearth(home, "tools", "explain")
    assert done.returncode == 0, done.stderr
    got = explained(done.stdout)
    assert {tool for tool, (mark, _) in got.items() if mark == "+"} == CODING - {"shell"}
    assert got["time__*"] == ("-", "not in the 'coding' profile (MCP server 'time'; its tools "
                                   "are listed when it first starts)")
    where = placement("auto", True, False)
    expected = f"shell placement: {where.mode}: {where.describe()}"
    assert ("network on" in expected) == where.sandboxed
    assert done.stdout.splitlines()[-1] == expected


@pytest.mark.parametrize(("text", "key"), [
    ('[tools]\nprofile = "huge"\n', "tools.profile"),
    ('[agents.x.tools]\ndeny = "shell"\n', "agents.x.tools.deny"),
    ('[tools]\nallowed = ["shell"]\n', "tools.allowed"),
])
def test_tools_explain_on_a_bad_config_exits_2_naming_the_key(home: Path, text: str,
                                                               key: str) -> None:
    write_config(home, text)
    done = hearth(home, "tools", "explain", "--agent", "x")
    assert done.returncode == 2
    assert key in done.stderr and done.stdout == ""
