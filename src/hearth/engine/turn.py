"""One turn: claim the session, revalidate, assemble context, drive the loop, settle.

The turn is a short composition of the steps that own each part; it holds the session's writer
claim from its start to its ending.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from hearth.config import Config, ModelConfig
from hearth.engine import context, endings, loop, recovery
from hearth.engine.approvals import ApprovalDesk
from hearth.engine.endings import Ending
from hearth.engine.events import Bus
from hearth.engine.state import Turn
from hearth.engine.supervise import ActiveTurns
from hearth.engine.toolbatch import run_batch
from hearth.faults import crash_point
from hearth.memory.service import Memory
from hearth.models.registry import ModelRegistry
from hearth.models.types import Provider, ToolCall
from hearth.privacy.scope import answered_by, as_work_of
from hearth.sessions import folders
from hearth.store import runs as run_store
from hearth.store import sessions as session_store
from hearth.store import transcript
from hearth.store.db import Database
from hearth.store.errors import WriterClaimLost
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.tools import policy
from hearth.tools.base import ToolContext, WebSettings
from hearth.tools.registry import ToolRegistry
from hearth.tools.sandbox import Placement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnDeps:
    db: Database
    bus: Bus
    config: Config
    models: ModelRegistry
    tools: ToolRegistry
    default_workspace: Path
    active: ActiveTurns
    desk: ApprovalDesk
    placement: Placement
    prepare_tools: Callable[[], Awaitable[None]]  # starts MCP servers when first needed
    memory: Memory
    after_turn: Callable[[RunRow, SessionRow], None]  # background chores (engine.chores)
    chats_dir: Path | None = None  # each chat's own folder (default: beside the workspace)


async def run_turn(deps: TurnDeps, run: RunRow) -> None:
    claimed = await deps.db.writing(_claim, run, durable=False)
    if isinstance(claimed, Ending):
        await endings.settle(deps.db, deps.bus, session_key=run.session_key,
                             run_id=run.run_id, ending=claimed, show=False)
        return
    crash_point("run_start")
    deps.bus.publish(run.session_key, {"type": "status", "running": True, "run_id": run.run_id})
    with as_work_of(claimed.key, claimed.memory_mode):  # every task and thread of the turn
        ending = await _run_claimed(deps, run, claimed)
    await endings.settle(deps.db, deps.bus, session_key=run.session_key, run_id=run.run_id,
                         ending=ending, show=ending.code != "stale")
    if ending.code == "complete":
        deps.after_turn(run, claimed)


def _claim(conn: Connection, run: RunRow) -> SessionRow | Ending:
    """Take ownership (running + writer claim), then check the snapshot again under it."""
    session = session_store.get(conn, run.session_key)
    if session is None:
        return endings.stale("its chat no longer exists.")
    if session.generation != run.generation or session.tab_id != run.tab_id:
        return endings.stale("its chat was reset or replaced after it was sent.")
    if not run_store.mark_running(conn, run.run_id):
        return endings.stale("it was no longer waiting to run.")
    if not session_store.claim_writer(conn, run.session_key, run.run_id):
        return endings.stale("another turn holds its chat.")
    return session


async def _run_claimed(deps: TurnDeps, run: RunRow, session: SessionRow) -> Ending:
    # built in a worker thread: the first build of a provider imports its SDK
    provider = await asyncio.to_thread(deps.models.for_chat, session.model)
    if provider is None:
        return endings.no_model()
    await deps.db.writing(run_store.set_model, run.run_id, provider.model_id, durable=False)
    with answered_by(provider.model_id):  # in a restricted chat, the one model its work reaches
        return await _run_on(deps, run, session, provider)


async def _run_on(deps: TurnDeps, run: RunRow, session: SessionRow,
                  provider: Provider) -> Ending:
    model_config = deps.models.config_of(provider.model_id)
    try:
        turn = _compose(deps, run, session, provider,
                        offer_tools=model_config.tools if model_config else True)
        turn.model_config = model_config
        if turn.offer_tools and policy.may_use_mcp(deps.config, session.agent):
            await deps.prepare_tools()
        waiting: list[ToolCall] = []
        if run.started_at is not None:  # it ran before, in a process that died
            resumed = await recovery.resume(turn)
            if isinstance(resumed, Ending):
                return resumed
            waiting = resumed
        return await deps.active.supervise(turn, _work(deps, turn, model_config, waiting))
    except WriterClaimLost:
        return endings.stale("it lost its hold on the chat while it ran.")
    except Exception as error:  # the turn boundary: a bug must end the turn, not wedge the chat
        log.exception("turn %s failed", run.run_id)
        return endings.internal(error)


def _compose(deps: TurnDeps, run: RunRow, session: SessionRow, provider: Provider,
             offer_tools: bool) -> Turn:
    return Turn(**scope_fields(deps, run, session), provider=provider, offer_tools=offer_tools,
                chosen_by=chosen_by(deps.models.chat_chain, session.model, provider.model_id))


def chosen_by(chain: list[str], pinned: str | None, model_id: str) -> str:
    """How the turn's model was chosen, in the words its footer says."""
    if pinned == model_id:
        return "this chat's own model"
    if chain and chain[0] == model_id:
        return "first in the chat chain"
    return "the only model set up"


def scope_fields(deps: TurnDeps, run: RunRow, session: SessionRow) -> dict[str, Any]:
    """What work done as this chat, under this run, is given (see `CallScope`)."""
    chats_dir = deps.chats_dir or deps.default_workspace.parent / "sessions"
    workspace = folders.workspace_for(session, chats_dir, deps.default_workspace)
    limits, tools = deps.config.limits, deps.config.tools
    context_for_tools = ToolContext(
        workspace=workspace, session_key=run.session_key, run_id=run.run_id,
        shell_timeout=limits.shell_timeout_seconds, output_chars=limits.tool_output_chars,
        web=WebSettings(tuple(tools.web_fetch_allow_hosts), tools.web_fetch_max_bytes,
                        tools.web_fetch_timeout_seconds),
        placement=deps.placement, memory_dir=deps.memory.folder,
    )
    return {"db": deps.db, "bus": deps.bus, "tools": deps.tools, "config": deps.config,
            "desk": deps.desk, "run": run, "workspace": workspace, "context": context_for_tools,
            "agent": session.agent, "trust": session.trust}


async def _work(deps: TurnDeps, turn: Turn, model_config: ModelConfig | None,
                waiting: list[ToolCall]) -> Ending:
    """Finish the calls a resumed run left waiting on the owner, then the loop."""
    if waiting:
        await run_batch(turn, tuple(waiting))
    fed = await asyncio.to_thread(deps.memory.context_for, await _message_of(deps, turn.run))
    turn.context_fed = fed.sentence
    system_prompt = _system_prompt(deps.config, turn.agent)
    if fed.block:
        system_prompt = f"{system_prompt}\n\n{fed.block}"
    messages = await context.build(
        deps.db, turn.run,
        system_prompt=system_prompt,
        history_messages=deps.config.limits.history_messages,
        context_window=model_config.context_window if model_config else 128_000,
        max_output_tokens=model_config.max_output_tokens if model_config else 8192,
    )
    return await loop.drive(turn, messages)


def _system_prompt(config: Config, agent: str | None) -> str:
    """The chat's agent's prompt (else the default one), and the owner's name when set."""
    own = config.agents.get(agent) if agent else None
    prompt = (own.system_prompt if own else None) or config.agent.system_prompt
    name = config.agent.user_name
    return f"{prompt}\n\nThe owner's name is {name}." if name else prompt


async def _message_of(deps: TurnDeps, run: RunRow) -> str:
    """The text of the message this run answers ("" for a run without one)."""
    if run.user_event_seq is None:
        return ""
    event = await deps.db.reading(transcript.at, run.session_key, run.user_event_seq)
    return str(event.content.get("text", "")) if event is not None else ""
