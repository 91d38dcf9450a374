"""One turn: claim the session, revalidate, assemble context, drive the loop, settle.

The turn is a short composition of the steps that own each part; it holds the session's writer
claim from its start to its ending. Its model comes from the chat's plan (`engine.turn.failover`):
the chat's pick, its agent's pin, then its use case's chain; when the model fails before
anything of the turn was shown, the turn moves to the next (`_drive_in_order`), saying so live
(a `status` frame's `note`) and on the answer's meta (`failover`, `model_substitution`).
The response format its message asked for (`meta.response_format`) goes with every model call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from hearth.config import Config
from hearth.engine.access import principals
from hearth.engine.delivery.events import Bus
from hearth.engine.observe.observer import Observer, failed_over
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn import agents, endings, failover, loop, recovery, writes
from hearth.engine.turn.approval.desk import ApprovalDesk
from hearth.engine.turn.compaction import in_turn
from hearth.engine.turn.context_cache import ContextCache
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.supervise import ActiveTurns
from hearth.engine.turn.toolbatch import run_batch
from hearth.engine.turn.turn_state import Turn
from hearth.engine.views import sent_text
from hearth.faults import crash_point
from hearth.memory.service import Memory
from hearth.models.calls import held_calls
from hearth.models.registry import Candidate, ModelRegistry
from hearth.models.spending import Account, charged_to
from hearth.models.types import Message, Provider, ResponseFormat, ToolCall
from hearth.privacy.scope import answered_by, as_work_of
from hearth.sessions import attachments as attachment_files, folders
from hearth.store import runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.errors import WriterClaimLost
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow
from hearth.tools import policy
from hearth.tools.base import ToolContext, WebSettings
from hearth.tools.registry import ToolRegistry
from hearth.tools.sandbox import Placement

log = logging.getLogger(__name__)
SETTLE_RETRY_SECONDS = 1.0  # between tries of an ending the database did not take
MODEL_FAILURES = frozenset({"model_error", "cut_off", "connection_lost"})  # count on breakers


@dataclass(frozen=True)
class TurnDeps:
    """What a turn runs with; `snapshot` (the config and the models) is the one the turn
    started from, kept to its end whatever the Settings page saves meanwhile."""

    db: Database
    bus: Bus
    snapshot: Snapshot
    tools: ToolRegistry
    default_workspace: Path
    active: ActiveTurns
    desk: ApprovalDesk
    placement: Placement
    prepare_tools: Callable[[], Awaitable[None]]  # starts MCP servers when first needed
    memory: Memory
    after_turn: Callable[[RunRow, SessionRow], None]  # background chores (engine.chores)
    chats_dir: Path | None = None  # each chat's own folder (default: beside the workspace)
    agents_dir: Path | None = None  # the agents' workspace files (default: beside it too)
    context: ContextCache = field(default_factory=ContextCache)  # chats' recent context
    replica: str | None = None  # this gateway's id among the replicas (store/replicas.py)
    observer: Observer = field(default_factory=Observer)  # counts and traces (engine/observe)

    @property
    def config(self) -> Config:
        return self.snapshot.config

    @property
    def models(self) -> ModelRegistry:
        return self.snapshot.models

    @property
    def agents_folder(self) -> Path:
        return self.agents_dir or self.default_workspace.parent / "agents"


async def run_next(deps: TurnDeps, session_key: str) -> bool | None:
    """Claim the chat's oldest admitted run and run its turn: True when one was taken (or
    its place in the queue had moved: look again), False when none waits, None when another
    gateway's turn holds the chat (on PostgreSQL's replicas; the lane waits and looks
    again)."""
    if await deps.db.reading(run_store.next_admitted, session_key) is None:
        return False  # read first: a lane's last look costs no write
    taken = await deps.db.writing(_take_next, session_key, deps.snapshot, deps.replica,
                                  durable=False)
    if taken is None or isinstance(taken, str):
        return None if taken == BUSY else False
    run, claimed = taken
    if isinstance(claimed, Ending):
        await endings.settle(deps.db, deps.bus, session_key=run.session_key,
                             run_id=run.run_id, ending=claimed, show=False)
        return True
    with deps.observer.watching(run.run_id, run.kind, run.session_key,
                                claimed.session.memory_mode):  # timed, and its span
        await _run_turn(deps, run, claimed)
    return True


async def _run_turn(deps: TurnDeps, run: RunRow, claimed: Claimed) -> None:
    crash_point("run_start")
    deps.bus.publish(run.session_key, {"type": "status", "running": True, "run_id": run.run_id})
    principal = principals.of_run(run)  # fixed at admission; read, never decided here
    memory = principal.is_owner or await deps.db.reading(principals.may_use_memory, principal)
    session = claimed.session
    spent_for = Account(agent=session.agent, app=principal.app, job=claimed.job)
    with as_work_of(session.key, session.memory_mode, principal, memory=memory), \
            charged_to(spent_for), \
            held_calls() as held:  # every task and thread of the turn; its last call's row
        ending = await _run_claimed(deps, run, claimed)
    calls = held.take()
    while True:
        try:
            await endings.settle(deps.db, deps.bus, session_key=run.session_key,
                                 run_id=run.run_id, ending=ending,
                                 show=ending.code != "stale", calls=calls)
            break
        except OperationalError:  # the ending waits for the database to come back (the
            await asyncio.sleep(SETTLE_RETRY_SECONDS)  # chat waits behind it; a stop leaves
            # the run to be taken back by the next start)
    if ending.code == "complete":
        deps.after_turn(run, session)


@dataclass(frozen=True)
class Claimed:
    """A run the turn owns: its chat as the claim read it, the model plan with the model it
    starts on (None: none may run) and the text of the message it answers."""

    session: SessionRow
    plan: failover.Plan
    first: Candidate | None
    asked: str
    job: int | None = None  # the job that fired it (its spending counts to the job)
    response_format: ResponseFormat | None = None  # what its message asked answers to be


BUSY = "busy"  # the chat's writer claim is another gateway's turn's
JOB_CHARGED = ("job", "helper")  # the kinds of run whose message may name the job they spend for


def _take_next(conn: Connection, session_key: str, snapshot: Snapshot, replica: str | None
               ) -> tuple[RunRow, Claimed | Ending] | str | None:
    """The chat's oldest admitted run, taken: its ownership (running on `replica`, with the
    chat's writer claim) and its snapshot checked again under it, or the ending of a run
    that can no longer run; BUSY when another turn holds the chat; None when none waits.
    The claim is conditional, so two gateways never both take a chat: the one whose update
    lands second finds the claim held and waits."""
    run = run_store.next_admitted(conn, session_key)
    if run is None:
        return None
    session = session_store.get(conn, run.session_key)
    if session is None:
        return run, endings.stale("its chat no longer exists.")
    if session.generation != run.generation or session.tab_id != run.tab_id:
        return run, endings.stale("its chat was reset or replaced after it was sent.")
    if not session_store.claim_writer(conn, run.session_key, run.run_id):
        return BUSY
    if not run_store.mark_running(conn, run.run_id, replica):
        return BUSY  # another gateway took this very run first (its claim names the same run)
    plan = failover.Plan.of(snapshot, session)
    first = plan.next(snapshot.models, needs_tools=False)
    if first is not None:
        run_store.set_model(conn, run.run_id, first.model_id)
    event = _message_of(conn, run)
    asked = sent_text(event) if event is not None else ""
    return run, Claimed(session, plan, first, asked, _job_of(run, event), _format_of(event))


async def _run_claimed(deps: TurnDeps, run: RunRow, claimed: Claimed) -> Ending:
    plan, first = claimed.plan, claimed.first
    if first is None:
        return endings.models_failed(plan.account()) if plan.tried else endings.no_model()
    # built in a worker thread: the first build of a provider imports its SDK
    provider = await asyncio.to_thread(deps.models.provider, first.model_id)
    if provider is None:
        return endings.no_model()
    with answered_by(provider.model_id):  # in a restricted chat, the one model its work reaches
        return await _run_on(deps, run, claimed, provider, first)


async def _run_on(deps: TurnDeps, run: RunRow, claimed: Claimed, provider: Provider,
                  first: Candidate) -> Ending:
    session, plan = claimed.session, claimed.plan
    model_config = deps.models.config_of(provider.model_id)
    try:
        turn = _compose(deps, run, session, provider,
                        offer_tools=model_config.tools if model_config else True)
        turn.model_config = model_config
        turn.chosen_by = first.chosen_by
        turn.response_format = claimed.response_format
        _say_substitution(turn, plan)
        if plan.tried:  # models before it passed over (an open breaker, no tools)
            _say_moved(turn, first, plan)
        if turn.offer_tools and policy.may_use_mcp(deps.config, session.agent):
            await deps.prepare_tools()
        waiting: list[ToolCall] = []
        if run.started_at is not None:  # it ran before, in a process that died
            resumed = await recovery.resume(turn)
            if isinstance(resumed, Ending):
                return resumed
            waiting = resumed
        return await deps.active.supervise(turn, _work(deps, turn, plan, waiting,
                                                       claimed.asked))
    except WriterClaimLost:
        return endings.stale("it lost its hold on the chat while it ran.")
    except OperationalError:  # the database went away (PostgreSQL restarting, the network)
        log.warning("turn %s lost the database", run.run_id)
        return endings.store_lost()
    except Exception as error:  # the turn boundary: a bug must end the turn, not wedge the chat
        log.exception("turn %s failed", run.run_id)
        return endings.internal(error)


def _compose(deps: TurnDeps, run: RunRow, session: SessionRow, provider: Provider,
             offer_tools: bool) -> Turn:
    return Turn(**scope_fields(deps, run, session), provider=provider, offer_tools=offer_tools,
                breakers=deps.models.breakers, context_cache=deps.context, models=deps.models)


def _say_substitution(turn: Turn, plan: failover.Plan) -> None:
    """A pick or pin that could not run: said live now, and on the answer's meta."""
    said = plan.resolution.substitution(turn.provider.model_id)
    if said is not None:
        turn.notes["model_substitution"] = said
        _say_live(turn, said)


def _say_live(turn: Turn, sentence: str) -> None:
    turn.bus.publish(turn.session_key, {"type": "status", "running": True,
                                        "run_id": turn.run_id, "model": turn.provider.model_id,
                                        "note": sentence})


def scope_fields(deps: TurnDeps, run: RunRow, session: SessionRow) -> dict[str, Any]:
    """What work done as this chat, under this run, is given (see `CallScope`)."""
    chats_dir = deps.chats_dir or deps.default_workspace.parent / "sessions"
    workspace = folders.workspace_for(
        session, chats_dir, agents.workspace_of(deps.config, session.agent)
        or deps.default_workspace)
    limits, tools = deps.config.limits, deps.config.tools
    context_for_tools = ToolContext(
        workspace=workspace, session_key=run.session_key, run_id=run.run_id,
        shell_timeout=limits.shell_timeout_seconds, output_chars=limits.tool_output_chars,
        web=WebSettings(tuple(tools.web_fetch_allow_hosts), tools.web_fetch_max_bytes,
                        tools.web_fetch_timeout_seconds),
        placement=deps.placement, memory_dir=deps.memory.folder,
        attachments_dir=attachment_files.folder_of(chats_dir, session.key),
    )
    return {"db": deps.db, "bus": deps.bus, "tools": deps.tools, "config": deps.config,
            "desk": deps.desk, "run": run, "workspace": workspace, "context": context_for_tools,
            "agent": session.agent, "trust": session.trust,
            "attachments_dir": attachment_files.folder_of(chats_dir, session.key)}


async def _work(deps: TurnDeps, turn: Turn, plan: failover.Plan,
                waiting: list[ToolCall], asked: str) -> Ending:
    """Finish the calls a resumed run left waiting on the owner, then the loop (`asked`: the
    text of the message the run answers)."""
    if waiting:
        await run_batch(turn, tuple(waiting))
    fed = await asyncio.to_thread(deps.memory.context_for, asked)
    turn.context_fed = fed.sentence
    told = await asyncio.to_thread(agents.instructions_for, deps.config, turn.agent,
                                   deps.agents_folder)
    if told.skipped:
        await _say(turn, "Left out of the agent's instructions, unreadable: "
                   + "; ".join(told.skipped) + ".")
    system_prompt = agents.assemble(told, fed.block)  # the safety rules last
    messages = await in_turn.view(turn, deps.models, system_prompt)  # compacted if due
    ending = await _drive_in_order(deps, turn, plan, messages)
    if ending.code == "complete" and told.word_limit is not None:  # no limit: nothing to read
        await _check_word_limit(turn, told, asked)
    return ending


async def _say(turn: Turn, sentence: str, meta: dict[str, Any] | None = None) -> None:
    """A notice in the chat, as this turn's (published by `writes.append`)."""
    await writes.append(turn, "notice", {"text": sentence}, meta=meta)


async def _check_word_limit(turn: Turn, told: agents.Instructions, asked: str) -> None:
    """An answer past the agent's own word limit gets a notice with its count (never cut)."""
    answer = await turn.db.reading(_final_answer, turn.session_key, turn.run_id)
    said = agents.over_limit(told, answer, asked)
    if said is not None:
        await _say(turn, said, {"word_limit": told.word_limit})


async def _drive_in_order(deps: TurnDeps, turn: Turn, plan: failover.Plan,
                          messages: list[Message]) -> Ending:
    """The loop on the turn's model; when it fails before anything was shown, again on the
    next model of the plan (each once), until one answers or none is left."""
    needs_tools = bool(turn.offered())
    while True:
        turn.may_fail_over = len(plan.resolution.order) > 1 and not plan.one_model
        try:
            with answered_by(turn.provider.model_id):  # the model the turn now runs on
                ending = await loop.drive(turn, messages)
        except failover.ModelFailed as failed:
            if failed.ending.code in MODEL_FAILURES:  # a missing key is a set-up mistake
                deps.models.breakers.failed(turn.provider.model_id)
            plan.failed(turn.provider.model_id, failed.why)
            candidate = plan.next(deps.models, needs_tools)
            if candidate is None:
                return _all_failed(plan, failed.ending)
            await _move_to(deps, turn, candidate, plan)
            messages = failed.messages
            continue
        if ending.code in MODEL_FAILURES:
            deps.models.breakers.failed(turn.provider.model_id)
        return ending


def _all_failed(plan: failover.Plan, last: Ending) -> Ending:
    """No model left: one tried alone ends as it failed; several are each named."""
    if len(plan.tried) == 1:
        return last
    return endings.models_failed(plan.account())


async def _move_to(deps: TurnDeps, turn: Turn, candidate: Candidate,
                   plan: failover.Plan) -> None:
    """Run the rest of the turn on `candidate`, saying so live and on the answer."""
    provider = await asyncio.to_thread(deps.models.provider, candidate.model_id)
    if provider is None:  # resolve names known models only
        raise LookupError(f"model {candidate.model_id} vanished from the registry")
    failed_id, why = plan.tried[-1]
    failed_over(failed_id)
    turn.provider = provider
    turn.model_config = deps.models.config_of(candidate.model_id)
    turn.resends = 0
    _say_substitution(turn, plan)
    _say_moved(turn, candidate, plan)
    await deps.db.writing(run_store.set_model, turn.run_id, candidate.model_id, durable=False)
    _say_live(turn, f"Moved to {candidate.model_id}: {failed_id} failed ({why}).")


def _say_moved(turn: Turn, candidate: Candidate, plan: failover.Plan) -> None:
    """The answer's footer and meta say which model answered, and why not the ones before."""
    turn.chosen_by = f"{candidate.chosen_by}, after {plan.account()}"
    turn.notes["failover"] = f"Answered by {candidate.model_id}: {plan.account()}."


def _final_answer(conn: Connection, key: str, run_id: str) -> str:
    """The text of the run's last answer ("" when it gave none)."""
    run = run_store.get(conn, run_id)
    if run is None or run.user_event_seq is None:
        return ""
    said = [e for e in transcript.of_run(conn, key, run_id, run.user_event_seq)
            if e.kind == "assistant" and not e.meta.get("partial")]
    return str(said[-1].content.get("text", "")) if said else ""


def _message_of(conn: Connection, run: RunRow) -> EventRow | None:
    """The message this run answers (None for a run without one)."""
    if run.user_event_seq is None:
        return None
    return transcript.at(conn, run.session_key, run.user_event_seq)


def _format_of(event: EventRow | None) -> ResponseFormat | None:
    """The response format the message asked its answers to be (`meta.response_format`, an
    OpenAI-compatible request's); None for any other."""
    meta = event.meta if event is not None and isinstance(event.meta, dict) else {}
    return ResponseFormat.of_openai(meta.get("response_format"))


def _job_of(run: RunRow, event: EventRow | None) -> int | None:
    """The job this run spends for, as its message says: a job's fire, or a helper a job's
    turn started (`meta.job`); None for any other run."""
    if run.kind not in JOB_CHARGED or event is None or not isinstance(event.meta, dict):
        return None
    job = event.meta.get("job")
    return job if isinstance(job, int) else None
