"""Tool calls an agent CLI asks for (through `hearth mcp`), run as the chat it serves.

Each call is run under a run of its own (kind `mcp`) so the ledger, the approvals and the
audit hold it like a turn's call: the chat's agent's policy decides whether the tool exists,
the gate whether it may go ahead (asking the owner when needed), and the ledger records it
before and after. It writes nothing to the chat's transcript: that conversation is the CLI's.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import Connection

from hearth.engine.access import principals
from hearth.engine.turn import endings
from hearth.engine.turn.runner import TurnDeps, scope_fields
from hearth.engine.turn.toolbatch import run_call
from hearth.engine.turn.turn_state import CallScope
from hearth.errors import Refusal
from hearth.models.types import ToolCall
from hearth.privacy.principal import Principal
from hearth.privacy.scope import as_work_of
from hearth.sessions import chats
from hearth.store import audit, ledger, runs as run_store
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.tools import policy
from hearth.tools.base import Tool

GONE = "The agent CLI went away before the call finished; it may or may not have taken effect."


async def tools_for(deps: TurnDeps, session_key: str) -> list[dict[str, Any]]:
    """The tools this chat's agent may use, as an MCP server lists them."""
    session = await chats.get_chat(deps.db, session_key)
    names = policy.allowed(deps.tools.names(), deps.config, session.agent)
    return [{"name": t.name, "description": t.description, "parameters": t.parameters,
             "effect": t.effect} for t in deps.tools.all() if t.name in names]


async def invoke_tool(deps: TurnDeps, session_key: str, name: str,
                      arguments: dict[str, Any], principal: Principal) -> dict[str, Any]:
    session = await chats.get_chat(deps.db, session_key)
    tool = await _allowed_tool(deps, session_key, session.agent, name)
    principal = principal.within(session.created_by_app)
    run = await deps.db.writing(_new_run, session, run_store.new_run_id(), principal)
    memory = principal.is_owner or await deps.db.reading(principals.may_use_memory, principal)
    scope = CallScope(**scope_fields(deps, run, session))
    call = ToolCall("mcp_" + uuid.uuid4().hex[:12], name, arguments)
    try:
        with as_work_of(session.key, session.memory_mode, principal, memory=memory), \
                deps.observer.watching(run.run_id, run.kind, session.key, session.memory_mode,
                                       timed=False):  # counted and traced, not as a turn
            outcome = await run_call(scope, 0, call, tool)
    except asyncio.CancelledError:
        await deps.db.writing(ledger.mark_unknown, run.run_id, f"Unknown: {GONE}")
        await endings.settle(deps.db, deps.bus, session_key=session_key, run_id=run.run_id,
                             ending=endings.stopped(GONE), show=False)
        raise
    await endings.settle(deps.db, deps.bus, session_key=session_key, run_id=run.run_id,
                         show=False, ending=endings.complete(outcome.receipt))
    return {"output": outcome.output, "ok": outcome.ok, "receipt": outcome.receipt,
            "run_id": run.run_id}


def _new_run(conn: Connection, session: SessionRow, run_id: str,
             principal: Principal) -> RunRow:
    run_store.insert(conn, run_id=run_id, session_key=session.key, tab_id=session.tab_id,
                     generation=session.generation, kind="mcp", principal=principal.encode())
    run_store.mark_running(conn, run_id)
    run = run_store.get(conn, run_id)
    assert run is not None
    return run


async def _allowed_tool(deps: TurnDeps, session_key: str, agent: str, name: str) -> Tool:
    tool = deps.tools.get(name)
    if tool is None:
        raise Refusal("tool_not_found", 404, f"There is no tool named {name!r}.")
    verdict = policy.judge(name, deps.config, agent)
    if not verdict.allowed:
        await deps.db.writing(audit.write, "tool.refused", actor="policy",
                              session_key=session_key, durable=False,
                              detail={"tool": name, "reason": verdict.reason, "via": "mcp"})
        raise Refusal("tool_not_allowed", 403,
                      f"{name} is not available to this chat's agent ({verdict.reason}).")
    return tool
