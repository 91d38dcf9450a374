"""Tool policy: which tools exist for an agent, and why each is in or out.

Capability only: where a tool runs is the sandbox's business, and whether a call may go ahead
is the approval gate's. The effective set is the agent's profile (or the global one), narrowed
by each non-empty allow list (global, then the agent's), minus every deny list. Deny always
wins; a non-empty allow list blocks every tool it does not name. Entries are tool names or
shell-style patterns (`time__*`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from hearth.config import Config, ToolPolicyConfig

MINIMAL = ("read_file", "list_dir", "glob", "grep", "memory_recall", "memory_list",
           "chat_search", "open_attachment")
CODING = (*MINIMAL, "write_file", "edit_file", "shell", "memory_remember", "memory_forget",
          "schedule_job", "spawn_helpers", "web_search")
PROFILES: dict[str, tuple[str, ...] | None] = {
    "minimal": MINIMAL,
    "coding": CODING,
    "full": None,  # every tool, web_fetch and MCP servers' tools included
}


@dataclass(frozen=True)
class Verdict:
    tool: str
    allowed: bool
    reason: str


def _names(patterns: Iterable[str], tool: str) -> str | None:
    return next((p for p in patterns if fnmatchcase(tool, p)), None)


def judge(tool: str, config: Config, agent: str) -> Verdict:
    """Is `tool` available to `agent`, and the one-line reason."""
    own = config.agents.get(agent)
    layers: list[tuple[str, ToolPolicyConfig]] = [("tools", config.tools)]
    if own is not None:
        layers.append((f"agents.{agent}.tools", own.tools))
    profile = (own.tools.profile if own and own.tools.profile else None) or \
        config.tools.profile or "coding"
    for where, layer in layers:
        denied_by = _names(layer.deny, tool)
        if denied_by:
            return Verdict(tool, False, f"denied by {where}.deny ({denied_by!r})")
    members = PROFILES[profile]
    if members is not None and tool not in members:
        return Verdict(tool, False, f"not in the {profile!r} profile")
    reason = f"in the {profile!r} profile"
    for where, layer in layers:
        if layer.allow:
            allowed_by = _names(layer.allow, tool)
            if not allowed_by:
                return Verdict(tool, False, f"not named by {where}.allow")
            reason += f", allowed by {where}.allow ({allowed_by!r})"
    return Verdict(tool, True, reason)


def explain(tools: Iterable[str], config: Config, agent: str) -> list[Verdict]:
    return [judge(name, config, agent) for name in sorted(tools)]


def allowed(tools: Iterable[str], config: Config, agent: str) -> set[str]:
    return {v.tool for v in explain(tools, config, agent) if v.allowed}


def may_use_server(server: str, config: Config, agent: str) -> tuple[bool, str]:
    """Whether any tool of MCP server `server` (`server__*`) can be in this agent's set, and
    why: its servers are started only when one may be."""
    own = config.agents.get(agent)
    layers: list[tuple[str, ToolPolicyConfig]] = [("tools", config.tools)]
    if own is not None:
        layers.append((f"agents.{agent}.tools", own.tools))
    profile = (own.tools.profile if own and own.tools.profile else None) or \
        config.tools.profile or "coding"
    every = f"{server}__*"
    for where, layer in layers:
        if any(fnmatchcase(every, p) for p in layer.deny):
            return False, f"denied by {where}.deny"
    if PROFILES[profile] is not None:  # MCP servers' tools are in the full profile only
        return False, f"not in the {profile!r} profile"
    reason = f"in the {profile!r} profile"
    for where, layer in layers:
        if not layer.allow:
            continue
        naming = _naming_server(layer, server)
        if naming is None:
            return False, f"not named by {where}.allow"
        reason += f", allowed by {where}.allow ({naming!r})"
    return True, reason


def _naming_server(layer: ToolPolicyConfig, server: str) -> str | None:
    """The allow entry that can name one of the server's tools (`time__*`, `time__now`)."""
    return next((p for p in layer.allow if fnmatchcase(f"{server}__x", p)
                 or ("__" in p and fnmatchcase(server, p.split("__", 1)[0]))), None)


def may_use_mcp(config: Config, agent: str) -> bool:
    """Whether any configured MCP server's tool can be in this agent's set."""
    return any(may_use_server(s.name, config, agent)[0] for s in config.mcp_servers)
