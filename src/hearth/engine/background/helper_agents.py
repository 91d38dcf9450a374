"""Helpers: work a chat hands to chats of their own, run in the background (`spawn_helpers`).

A helper is a chat whose `parent_key` is the chat that started it, with the same memory mode,
agent, model and folder, and its task admitted as its first message, as a run of kind
`helper`: unattended (a call that needs the owner's approval is refused with a sentence) and
stopped after `[limits] helper_seconds`. Limits, checked in the one transaction that starts a
batch: how deep helpers may start helpers (`helper_depth`) and how many of a chat's may be
at work at once (`helpers_running`; a batch past it starts what fits and says what did not).

When a helper's run ends, its chat is told, once (the idempotency key `helper:<run>`):
- work that ran (answered, failed, cut off by a limit) is admitted into the parent as a report
  message: it starts the parent's next turn, after the turn that asked for it (the chat's lane
  runs them in order), so the agent carries the work on or says why it failed;
- a helper that never ran, or that the owner stopped, starts no turn: a notice says how it
  ended, which the parent's model reads before its next message (`meta.tell_model`).
Reports are sent as helper runs end (the live bus's `done`) and, at start, for any a crash
left unsent (`sweep`). Only a helper's run is reported: the engine keeps the ids of the helper
runs not ended yet (`HelperHost.helper_runs`: each added as it is started, and at start those
a previous process left, `watch_active`), so the `done` of any other run costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, select

from hearth.config import Config, LimitsConfig
from hearth.engine.delivery.events import Bus, Frame, message_frame
from hearth.engine.intake import admission
from hearth.models import spending
from hearth.privacy import principal as principals
from hearth.privacy.modes import mode_of, restricted
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.chats import NewChat
from hearth.store import runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.errors import AlreadyAppended
from hearth.store.runs import RunRow
from hearth.store.schema import runs, sessions
from hearth.store.transcript import EventRow
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused

log = logging.getLogger(__name__)

KIND = "helper"  # a helper's runs
ORIGIN = "helper"
MAX_BATCH = 5
TASK_MAX = 8000
NOT_RAN = frozenset({"stopped", "stale"})  # the owner stopped it, or it never began
SWEEP_SECONDS = 7 * 24 * 3600  # how far back a start looks for reports a crash left unsent
ACTIVE = ("admitted", "running")


class HelperHost(Protocol):
    """What starting helpers and telling their chats how they ended need of the engine."""

    db: Database
    bus: Bus
    accepting: bool  # False once the gateway stops: no report is started then
    helper_runs: set[str]  # the helper runs not ended yet: only their `done` is reported

    @property
    def config(self) -> Config: ...  # the snapshot the next turn runs from (its limits)

    def dispatch(self, session_key: str) -> None: ...


@dataclass(frozen=True)
class Started:
    key: str
    run_id: str
    task: str


@dataclass(frozen=True)
class Batch:
    started: list[Started]
    not_started: list[str]  # the tasks past the limit
    events: list[EventRow]


def _depth(conn: Connection, key: str, limit: int) -> int:
    """How many parents the chat has (0: a chat of the owner's), counted up to `limit` + 1."""
    depth, current = 0, session_store.get(conn, key)
    while current is not None and current.parent_key and depth <= limit:
        depth += 1
        current = session_store.get(conn, current.parent_key)
    return depth


def _at_work(conn: Connection, parent_key: str) -> int:
    children = select(sessions.c.key).where(sessions.c.parent_key == parent_key)
    return len(conn.execute(select(runs.c.run_id).where(
        runs.c.session_key.in_(children), runs.c.status.in_(ACTIVE))).all())


def _start_in(conn: Connection, parent_key: str, asking_run: str, tasks: list[str],
              limits: LimitsConfig, job: int | None = None) -> Batch:
    parent = session_store.get(conn, parent_key)
    if parent is None:
        raise ToolRefused("This chat no longer exists, so no helper was started.")
    if _depth(conn, parent_key, limits.helper_depth) >= limits.helper_depth:
        raise ToolRefused(f"Helpers may start helpers only {limits.helper_depth} level(s) "
                          "deep, and this chat is that deep already: do the work here.")
    room = max(0, limits.helpers_running - _at_work(conn, parent_key))
    batch = Batch([], tasks[room:], [])
    principal = _principal_of(conn, asking_run)  # a helper works for its chat's principal
    for task in tasks[:room]:
        new = NewChat(memory_mode=parent.memory_mode, agent=parent.agent, model=parent.model,
                      workspace_dir=parent.workspace_dir, trust="ask", origin=ORIGIN,
                      created_by_app=parent.created_by_app)  # an app's helper is its own
        helper = chats.insert_new(conn, new)
        session_store.update_fields(conn, helper.key, parent_key=parent_key,
                                    title=helper_title(parent.memory_mode, task))
        meta: dict[str, Any] = {"helper_of": {"session": parent_key, "run": asking_run}}
        if job is not None:
            meta["job"] = job  # a job's helper spends for the job (its limit holds it too)
        admitted, event = admission.admit_in(conn, helper.key, task, None, ORIGIN, KIND, meta,
                                             principal=principal)
        batch.started.append(Started(helper.key, admitted.run_id, task))
        if event is not None:
            batch.events.append(event)
    return batch


def _principal_of(conn: Connection, run_id: str) -> Principal:
    """The asking run's principal (a run that is gone: a guest of nowhere, never the owner)."""
    run = run_store.get(conn, run_id)
    return principals.decode(run.principal if run is not None else None)


def helper_title(memory_mode: str, task: str) -> str:
    """A helper's title: its task's first words, or, for a chat that keeps nothing, its mode
    alone (a title is shown in lists; a restricted chat's words are not)."""
    if restricted(mode_of(memory_mode)):
        return f"{chats.MODE_TITLES.get(memory_mode, 'Temporary chat')}: helper"
    return f"Helper: {' '.join(task.split())[:60]}"


class SpawnHelpers:
    """The `spawn_helpers` tool."""

    name = "spawn_helpers"
    description = (
        "Hand tasks to helpers that work in the background, each in a chat of its own with "
        "this chat's memory mode and model. Give `tasks`: 1 to 5 self-contained instructions "
        "(a helper sees nothing of this chat). Do not wait for them: each helper's report "
        "arrives as a message after this turn ends. Helpers cannot do what needs the owner's "
        "approval.")
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"tasks": {"type": "array", "items": {"type": "string"},
                                 "minItems": 1, "maxItems": MAX_BATCH,
                                 "description": "One self-contained instruction per helper"}},
        "required": ["tasks"],
    }
    effect: Effect = "changes"  # it starts work that costs and runs on: the owner's yes
    placed: Placed = "gateway"
    parallel_safe = False

    def __init__(self, engine: HelperHost) -> None:
        self.engine = engine

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        tasks = _tasks(args.get("tasks"))
        if ctx.run_id is None:
            raise ToolRefused("Helpers are started from a chat's turn only.")
        batch = await self.engine.db.writing(_start_in, ctx.session_key, ctx.run_id, tasks,
                                             self.engine.config.limits, spending.account().job)
        self.engine.helper_runs.update(started.run_id for started in batch.started)
        for event in batch.events:
            self.engine.bus.publish(event.session_key, message_frame(event))
        for started in batch.started:
            self.engine.dispatch(started.key)
        return ToolOutcome(*_said(batch, self.engine.config.limits))


def _tasks(raw: object) -> list[str]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_BATCH:
        raise ToolRefused(f"`tasks` must be a list of 1 to {MAX_BATCH} instructions.")
    tasks = [task.strip() for task in raw if isinstance(task, str) and task.strip()]
    if len(tasks) != len(raw):
        raise ToolRefused("Each task must be a non-empty text.")
    if any(len(task) > TASK_MAX for task in tasks):
        raise ToolRefused(f"A task is at most {TASK_MAX:,} characters.")
    return tasks


def _said(batch: Batch, limits: LimitsConfig) -> tuple[str, str]:
    if not batch.started:
        sentence = (f"No helper was started: {limits.helpers_running} of this chat's helpers "
                    "are at work already. Do the work here, or ask again once they report.")
        raise ToolRefused(sentence)
    lines = [f"Started helper {s.key}: {s.task[:80]}" for s in batch.started]
    if batch.not_started:
        lines.append(f"Not started ({limits.helpers_running} may work at once): "
                     + "; ".join(task[:80] for task in batch.not_started))
    lines.append("Each helper's report arrives as a message after this turn ends; do not "
                 "wait for it.")
    receipt = f"Started {len(batch.started)} helper(s)" + (
        f"; {len(batch.not_started)} not started" if batch.not_started else "")
    return "\n".join(lines), receipt + "."


# ---------------------------------------------------------------------------------- reports

REPORT = "Report from helper {key} ({how}):\n\n{answer}"
NOTE = "Helper {key} ({task}) did not do its work: {how}"


def _final_answer(conn: Connection, run: RunRow) -> str:
    if run.user_event_seq is None:
        return ""
    said = [e for e in transcript.of_run(conn, run.session_key, run.run_id, run.user_event_seq)
            if e.kind == "assistant" and str(e.content.get("text", "")).strip()]
    return str(said[-1].content["text"]) if said else ""


def _report_in(conn: Connection, run_id: str) -> tuple[EventRow | None, bool]:
    """Tell the parent how the helper's run ended, once; (the event, whether it is a message
    that starts a turn)."""
    run = run_store.get(conn, run_id)
    if run is None or run.kind != KIND or run.status in ACTIVE:
        return None, False
    helper = session_store.get(conn, run.session_key)
    parent = (session_store.get(conn, helper.parent_key)
              if helper is not None and helper.parent_key else None)
    if helper is None or parent is None:
        return None, False
    idem = f"helper:{run_id}"
    meta = {"helper_report": {"session": helper.key, "run": run_id, "ending": run.ending}}
    if run.ending in NOT_RAN:
        task = helper.title or helper.key
        note = NOTE.format(key=helper.key, task=task, how=run.sentence or run.ending)
        try:
            event = transcript.append(conn, parent.key, "notice", {"text": note},
                                      meta={**meta, "tell_model": True}, idempotency_key=idem)
        except AlreadyAppended:
            return None, False
        return event, False
    text = REPORT.format(key=helper.key, how=run.sentence or run.ending or "ended",
                         answer=_final_answer(conn, run) or "(it gave no answer)")
    _admitted, message = admission.admit_in(conn, parent.key, text, idem, ORIGIN, "chat", meta,
                                            principal=principals.decode(run.principal))
    return message, message is not None


async def report(engine: HelperHost, run_id: str) -> None:
    """Tell a helper's parent how its run ended (nothing for any other run, or twice)."""
    event, starts = await engine.db.writing(_report_in, run_id)
    if event is None:
        return
    engine.bus.publish(event.session_key, message_frame(event))
    if starts:
        engine.dispatch(event.session_key)


def heard(engine: HelperHost, tasks: set[asyncio.Task[None]]) -> Any:
    """A bus listener: each run's `done` is checked for a helper's (reported in a task)."""
    def listener(_session_key: str, frame: Frame) -> None:
        if frame.get("type") != "done" or not engine.accepting:
            return
        run_id = str(frame["run_id"])
        if run_id not in engine.helper_runs:
            return  # not a helper's run: nothing to tell
        engine.helper_runs.discard(run_id)
        task = asyncio.create_task(_reporting(engine, run_id), name="helper:report")
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    return listener


async def _reporting(engine: HelperHost, run_id: str) -> None:
    try:
        await report(engine, run_id)
    except (OSError, RuntimeError) as error:  # the sweep at the next start sends it
        log.warning("a helper's report was not sent now (%s); the next start sends it",
                    type(error).__name__)


async def watch_active(engine: HelperHost) -> int:
    """At start, before any run is dispatched: watch the helper runs a previous process left
    admitted or running, so their `done` is reported; how many."""
    active = await engine.db.reading(_active_helper_runs)
    engine.helper_runs.update(active)
    return len(active)


def _active_helper_runs(conn: Connection) -> list[str]:
    return list(conn.execute(select(runs.c.run_id).where(
        runs.c.kind == KIND, runs.c.status.in_(ACTIVE))).scalars())


async def sweep(engine: HelperHost) -> int:
    """At start: the reports of helper runs that ended while a crash kept them unsent."""
    since = time.time() - SWEEP_SECONDS
    ended = await engine.db.reading(_ended_helper_runs, since)
    for run_id in ended:
        await report(engine, run_id)
    return len(ended)


def _ended_helper_runs(conn: Connection, since: float) -> list[str]:
    return list(conn.execute(select(runs.c.run_id).where(
        runs.c.kind == KIND, runs.c.status.not_in(ACTIVE), runs.c.ended_at >= since)
        .order_by(runs.c.ended_at)).scalars())


async def helpers_of(engine: HelperHost, parent_key: str) -> list[dict[str, Any]]:
    """The chat's helpers, for its page: key, title, and whether each is at work."""
    return await engine.db.reading(_helpers_in, parent_key)


def _helpers_in(conn: Connection, parent_key: str) -> list[dict[str, Any]]:
    rows = conn.execute(select(sessions.c.key, sessions.c.title).where(
        sessions.c.parent_key == parent_key).order_by(sessions.c.created_at)).all()
    out = []
    for key, title in rows:
        current = run_store.current(conn, key)
        out.append({"key": key, "title": title,
                    "working": current is not None and current.status in ACTIVE})
    return out
