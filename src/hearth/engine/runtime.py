"""The engine: composes the store, the live bus, the lanes, models and tools.

It owns the gateway's turn machinery for one process: `start` recovers what a previous process
left (before anything is served) and re-queues admitted runs in order; `send` admits a message
and wakes its lane; `stop` ends a chat's running turn; `close` stops admitting, lets running
turns finish within the grace period, and leaves the rest to be resumed by the next start.
Its timed loops (the scheduler, the sweepers, the replica's, the lanes') all wait on the one
`Clock` it is given (the system's unless a test hands it a fake one).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock, SystemClock
from hearth.config import Config
from hearth.engine.access.desk import Access
from hearth.engine.background import held_uploads, helper_agents, idle_summaries, spending_sync
from hearth.engine.background.backups import ScheduledBackups
from hearth.engine.background.chores import Chores
from hearth.engine.background.job_desk import Jobs
from hearth.engine.background.replica import Replica
from hearth.engine.background.scheduler import Scheduler
from hearth.engine.delivery.desk import DeliveryDesk
from hearth.engine.delivery.events import Bus
from hearth.engine.delivery.relay import Relay
from hearth.engine.intake import admission, first_message, mentions
from hearth.engine.intake.admission import AdmissionError, Admitted
from hearth.engine.intake.attachment_desk import AttachmentDesk
from hearth.engine.observe.desk import Vitals
from hearth.engine.observe.observer import Observer
from hearth.engine.observe.traces import Tracing
from hearth.engine.operations import branching, deletion, read_aloud
from hearth.engine.operations.chat_desk import Chats
from hearth.engine.operations.deletion import DeleteReport
from hearth.engine.operations.owner_files import OwnerFiles
from hearth.engine.reads.facade import Reads
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn import agent_cli_calls, endings, steering
from hearth.engine.turn.approval.desk import ApprovalDesk
from hearth.engine.turn.runner import TurnDeps, run_next
from hearth.engine.turn.supervise import ActiveTurns
from hearth.memory.desk import MemoryDesk
from hearth.memory.service import Memory
from hearth.models import spending
from hearth.models.spending import Spending
from hearth.privacy.principal import Principal
from hearth.privacy.scope import install_default_executor
from hearth.privacy.stores import protect
from hearth.sessions.chats import Choices
from hearth.sessions.lanes import Lanes
from hearth.settings import Settings, overlay
from hearth.store import model_calls, runs as run_store, sessions as session_store
from hearth.store.db import Database
from hearth.store.sessions import SessionRow
from hearth.tasks import cancel_and_wait
from hearth.tools.registry import ToolRegistry
from hearth.tools.sandbox import placement

if TYPE_CHECKING:
    from hearth.tools.mcp_client import McpServers

log = logging.getLogger(__name__)
STORE_RETRY_SECONDS = 1.0  # a lane's pause before looking again when the store failed


class Engine:
    def __init__(
        self,
        *,
        db: Database,
        snapshot: Snapshot,
        tools: ToolRegistry,
        workspace: Path,
        hidden_from_tools: tuple[Path, ...] = (),
        memory: Memory | None = None,
        chats_dir: Path | None = None,
        base_config: Config | None = None,
        agents_dir: Path | None = None,
        clock: Clock | None = None,
    ) -> None:
        protect(db)  # the memory tables refuse changes from work that keeps nothing
        self.db = db
        self.clock = clock or SystemClock()  # what the timed loops read and wait on
        config = snapshot.config
        self.base_config = base_config or config  # config.toml's, the one input of `adopt`
        self.memory = memory or Memory(db, workspace / "memory")
        self.chats_dir = chats_dir or workspace.parent / "sessions"  # each chat's own folder
        self.prompts_dir = mentions.folder_of(self.chats_dir.parent)  # saved prompts (@name)
        self.deleting: set[str] = set()  # chats being deleted take no new message
        self.boot = uuid.uuid4().hex  # this start's own id: a client sees a restart by it
        self.bus = Bus()
        self.active = ActiveTurns()
        # what the engine counts and traces (engine/observe), told by the seams that see it
        self.observer = Observer(Tracing.configured(config.telemetry.otlp_endpoint))
        db.writer.on_commit = self.observer.committed
        self.bus.tap_own(self.observer.heard)
        self.desk = ApprovalDesk(db, self.bus)
        self.chores = self._chores()
        self.placement = placement(config.tools.sandbox, config.tools.network,
                                   config.tools.elevated,
                                   tuple(str(p) for p in hidden_from_tools))
        self.deps = TurnDeps(db=db, bus=self.bus, snapshot=snapshot, tools=tools,
                             default_workspace=workspace, active=self.active, desk=self.desk,
                             placement=self.placement, prepare_tools=self._list_mcp_tools,
                             memory=self.memory, after_turn=self.chores.after_turn,
                             chats_dir=self.chats_dir, agents_dir=agents_dir)
        self.mcp: McpServers | None = None  # made when first needed: the SDK takes ~1 s to import
        self._mcp_listed = False
        self._mcp_lock = asyncio.Lock()
        self.lanes: Lanes | None = None
        # this gateway among those serving the database; the bus across them (PostgreSQL)
        self.replica = Replica(db, self.bus, str(self.chats_dir.parent),
                               config.gateway.lease_seconds, self.clock)
        self.deps = replace(self.deps, replica=self.replica.id, observer=self.observer)
        self.relay: Relay | None = None
        self.accepting = False
        self._sweeper: asyncio.Task[None] | None = None
        self._summarizer: asyncio.Task[None] | None = None
        self._held_sweeper: asyncio.Task[None] | None = None  # uploads never sent
        self._spending_sync: asyncio.Task[None] | None = None
        self._leader: asyncio.Task[None] | None = None  # waits to lead (PostgreSQL)
        self._waiting_to_lead: set[asyncio.Task[None]] = set()
        self.scheduler = Scheduler(self, clock=self.clock)  # fires due jobs, start to close
        # [backup] every: the home backed up on schedule, on the leader (background/backups)
        self.backups = ScheduledBackups(self.chats_dir.parent, db.url,
                                        lambda: self.config.backup, self.clock)
        self._reports: set[asyncio.Task[None]] = set()  # helpers' reports being sent
        self.helper_runs: set[str] = set()  # helper runs not ended yet: their end is reported
        tools.add(helper_agents.SpawnHelpers(self))
        self._facade(db)
        # what model calls spent, held to [limits]' spending limits (models.spending)
        self.spending = Spending(lambda: self.config.limits,
                                 lambda model_id: self.snapshot.models.config_of(model_id))

    def _chores(self) -> Chores:
        """The background chores (titles, learning, idle summaries), on the current
        snapshot's models and settings."""
        chores = Chores(self.db, lambda: self.deps.models, self.memory,
                        learning_settings=lambda: self.config.learning,
                        limits=lambda: self.config.limits)
        chores.register(idle_summaries.KIND,
                        idle_summaries.doer(lambda: self.deps, chores.budget))
        return chores

    def _facade(self, db: Database) -> None:
        """The facade the surfaces reach the engine by: each holds the store itself, every
        method awaited, so no surface touches the store handle."""
        self.reads = Reads(db)
        self.chats = Chats(db, lambda: self.deps, self.placement.hidden)
        self.jobs = Jobs(db)
        self.access = Access(db)
        self.memory_desk = MemoryDesk(self.memory)
        self.files = OwnerFiles(self.deps.agents_folder, self.prompts_dir)
        self.attachments = AttachmentDesk(db, self.chats_dir, lambda: self.config.attachments,
                                          lambda: self.config.apps)
        self.vitals = Vitals(db, self.observer, self.active.running,
                             lambda: self.snapshot.breakers())  # /metrics, /api/status
        self.delivery_desk = DeliveryDesk(db, self.chores)  # what failed to go out, owed

    @property
    def snapshot(self) -> Snapshot:
        """The settings snapshot the next turn runs from: the config and the models, together
        (the one place they are read; a running turn holds its own in its deps)."""
        return self.deps.snapshot

    @property
    def config(self) -> Config:
        """The config the next turn runs from (the snapshot's)."""
        return self.deps.snapshot.config

    def adopt(self, kept: Settings) -> list[str]:
        """Make the dashboard's kept settings the snapshot the next turn runs from: laid over
        config.toml's (`base_config`), the config and the model registry read from it swapped
        in whole. A turn already running keeps the snapshot it started with (its deps);
        nothing is changed in place. The sentences say what was left out."""
        config, notes = overlay(self.base_config, kept)
        self.deps = replace(self.deps, snapshot=self.deps.snapshot.adopt(config))
        return notes

    def choices(self) -> Choices:
        """The models and agents a chat may be set to run on now: the snapshot's."""
        return self.deps.snapshot.choices()

    async def start(self) -> None:
        """Recover, then re-queue every chat's waiting runs in order (their turns run later)."""
        begun = time.monotonic()
        install_default_executor(asyncio.get_running_loop())
        await asyncio.to_thread(self.memory.start)
        month = spending.period_start("month", time.time())
        self.spending.load(await self.db.reading(model_calls.spent_since, f"{month}-01"))
        self.lanes = Lanes(self.config.gateway.max_concurrent_turns, self._run_next,
                           self.clock)
        replica = self.replica
        await replica.join()
        if not replica.shared:
            await self.db.writing(session_store.release_all_writers)
        # a Temporary chat a previous process left (it crashed, or its last stop failed) ended
        # with that process: forgotten before recovery could resume anything of it (with
        # other replicas serving, it may be theirs: their idle sweep ends it)
        alone = await replica.alone()
        forgotten = await deletion.forget_temporary(self, "restart") if alone else []
        taken = await replica.take_back(self.config.limits.recovery_attempts)
        await helper_agents.watch_active(self)  # before any runs: a helper's end is reported
        if replica.shared:
            await self._relay()
        waiting = await self.db.reading(run_store.sessions_with_admitted)
        for session_key in waiting:
            self.lanes.dispatch(session_key)
        self.accepting = True
        self.bus.tap(helper_agents.heard(self, self._reports))  # a helper's end is told its chat
        replica.start(lambda: self.config.limits.recovery_attempts, self.dispatch,
                      self._lapsed)
        if replica.shared:  # what the other gateways spend counts here too
            self._spending_sync = asyncio.create_task(spending_sync.merge_forever(
                self.db, self.spending, replica.lease / 3, self.clock), name="spending:merge")
        if replica.leading.is_set():
            await self._lead()
        else:
            self._leader = asyncio.create_task(replica.when_leading(self._lead),
                                               name="replicas:leader")
        if forgotten:
            log.info("forgot %d temporary chat(s) left by the previous process", len(forgotten))
        if taken.requeued or taken.past_budget or waiting:
            log.info("recovered in %.0f ms: %d interrupted run(s) resumed, %d abandoned, "
                     "%d chat(s) with waiting messages", (time.monotonic() - begun) * 1000,
                     len(taken.requeued), len(taken.past_budget), len(waiting))

    def on_leading(self, then: Callable[[], None]) -> None:
        """Call `then` (on the loop) once this gateway leads: at once on SQLite, and on
        PostgreSQL when it holds the leader's lease (the chat channels start so)."""
        if self.replica.leading.is_set():
            then()
            return

        async def later() -> None:
            await self.replica.leading.wait()
            then()

        self._waiting_to_lead.add(asyncio.create_task(later(), name="replicas:on-leading"))

    async def _lead(self) -> None:
        """What runs on one gateway only (the leader: at once on SQLite): the helpers' reports
        a crash left untold, the sweepers, the scheduler, the scheduled backups and the
        owed chores."""
        await helper_agents.sweep(self)
        self._sweeper = asyncio.create_task(
            deletion.sweep_forever(self, self.config.limits.temporary_idle_seconds,
                                   self.clock),
            name="sweep:temporary")
        self.scheduler.start()
        self.backups.start()
        await self.chores.start()  # owed chores, a previous process's included, are tried again
        self._summarizer = asyncio.create_task(
            idle_summaries.sweep_forever(lambda: self.deps, self.clock, self.chores),
            name="sweep:idle-summaries")
        self._held_sweeper = asyncio.create_task(
            held_uploads.sweep_forever(self.attachments, lambda: self.config.attachments,
                                       self.clock),
            name="sweep:held-uploads")

    async def _relay(self) -> None:
        """The live bus across replicas: another's frames published here, a lane waiting on
        a chat woken when its turn ended there, a call waiting on an approval answered there
        woken, and a Stop for a turn running here done when asked there."""
        self.relay = Relay(self.bus, self.replica.id, self.db.url)
        self.relay.on_frame.append(self._heard_elsewhere)
        self.relay.ops["stop"] = self.active.stop
        await self.relay.start()

    def _heard_elsewhere(self, session_key: str, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "done" and self.lanes is not None and self.lanes.busy(session_key):
            self.lanes.dispatch(session_key)
        elif kind == "approval":
            approval = frame.get("approval") or {}
            if approval.get("status") != "pending" and approval.get("id"):
                self.desk.wake([str(approval["id"])])

    def _lapsed(self, sentence: str) -> None:
        """This gateway's lease ran out (another replica may resume its turns): it ends as
        when the writer fails, saying why."""
        on_death = self.db.writer.on_death
        if on_death is not None:
            on_death(sentence)
        else:
            log.critical("%s", sentence)

    async def warm(self) -> None:
        """Build the chat chain's head model now, off the loop: importing its SDK takes a
        quarter of a second of CPU or more, so the gateway does it once it serves (see
        web/http/starting.py) rather than in the first turn or before the port answers."""
        await asyncio.to_thread(self.deps.models.warm)

    async def send(
        self, session_key: str, text: str, *, principal: Principal,
        client_message_id: str | None = None,
        source_channel: str | None = None, kind: str = "chat", dispatch: bool = True,
        meta: dict[str, Any] | None = None, idempotency_key: str | None = None,
        files: tuple[str, ...] = (),
    ) -> Admitted:
        """Admit a message (with `files`: the chat's uploads it sends, `engine.attachments`).
        With `dispatch=False` the caller wakes the lane itself (`dispatch`) once it has
        acknowledged, so the acknowledgement goes out before the turn's work."""
        if not self.accepting:
            raise AdmissionError(
                "shutting_down", 503,
                "The gateway is stopping and takes no new messages; send it again once it is "
                "back.",
            )
        if session_key in self.deleting:
            raise AdmissionError("session_deleting", 409,
                                 f"Chat {session_key!r} is being deleted; it takes no message.")
        mention = await mentions.prepare(self.prompts_dir, text, meta)  # @name expanded
        began = time.monotonic()
        admitted = await admission.admit(self.db, self.bus, session_key, text,
                                   principal=principal, client_message_id=client_message_id,
                                   source_channel=source_channel, kind=kind, meta=mention.meta,
                                   idempotency_key=idempotency_key,
                                   steer=steering.may_steer(self.active.turn_of(session_key)),
                                   files=admission.Files(
                                       files, self.config.attachments.max_message_bytes)
                                   if files else None)
        self.observer.admitted(time.monotonic() - began)
        await mentions.tell(self.db, self.bus, admitted, mention)
        if dispatch and not admitted.duplicate:
            self.dispatch(session_key)
        return admitted

    async def send_first(
        self, text: str, *, principal: Principal, memory_mode: str | None = None,
        agent: str | None = None,
        model: str | None = None, client_message_id: str | None = None,
        trust: str | None = None, workspace_dir: str | None = None, origin: str = "api",
        dispatch: bool = True,
    ) -> first_message.FirstSent:
        """Open a new chat with its first message, both written at once (a failed send leaves
        no empty chat): see engine.first_message."""
        began = time.monotonic()
        sent = await first_message.send_first(
            self, text, principal=principal, memory_mode=memory_mode, agent=agent, model=model,
            client_message_id=client_message_id, trust=trust, workspace_dir=workspace_dir,
            origin=origin, dispatch=dispatch)
        self.observer.admitted(time.monotonic() - began)
        return sent

    async def delete_chat(self, session_key: str) -> DeleteReport:
        """Delete the chat and everything of it (see engine.deletion)."""
        return await deletion.delete_chat(self, session_key)

    async def end_temporary(self, session_key: str) -> str | None:
        """Forget a Temporary chat now, its running turn stopped first (a stateless request's
        chat, when the request ends): None once it is wholly gone, else what keeps it."""
        report = await deletion.end_chat(self, session_key, "temporary_ended", stop_running=True)
        return None if report is None or report.deleted else (report.reason or "it is kept")

    def dispatch(self, session_key: str) -> None:
        """Wake the chat's lane (idempotent)."""
        if self.lanes is not None:
            self.lanes.dispatch(session_key)

    async def stop(self, session_key: str) -> str | None:
        """End the chat's running turn at once (or its next run, if it waits for a slot)."""
        stopped = self.active.stop(session_key)
        if stopped is not None:
            return stopped
        waiting = await self.db.reading(run_store.current, session_key)
        if waiting is not None and waiting.status == "running" and self.relay is not None:
            self.relay.tell("stop", session_key)  # its turn runs on another replica
            return waiting.run_id
        if waiting is None or waiting.status != "admitted" or self.lanes is None:
            return None
        if not self.lanes.busy(session_key):
            return None  # queued behind nothing: it starts at once; nothing to stop yet
        await endings.settle(self.db, self.bus, session_key=session_key, run_id=waiting.run_id,
                       ending=endings.stopped())
        return waiting.run_id

    async def _run_next(self, session_key: str) -> bool | None:
        try:
            return await run_next(self.deps, session_key)
        except SQLAlchemyError as error:  # the database is away: its queue waits, and the
            log.warning("could not take chat %s's next run (%s); looking again",  # lane
                        session_key, type(error).__name__)  # looks again in a while
            await asyncio.sleep(STORE_RETRY_SECONDS)
            return True

    async def _list_mcp_tools(self) -> None:
        """Start the MCP servers (the first time a turn may use their tools) and add their
        tools to the registry; a server that fails is said in `mcp.status()`."""
        if self._mcp_listed or not self.config.mcp_servers:
            return
        async with self._mcp_lock:
            if not self._mcp_listed:
                from hearth.tools.mcp_client import McpServers

                self.mcp = McpServers(self.config.mcp_servers)
                for tool in await self.mcp.tools():
                    self.deps.tools.add(tool)
                self._mcp_listed = True
                for name, status in self.mcp.status().items():
                    if status != "ready":
                        log.warning("MCP server %s: %s", name, status)

    async def retry(self, run_id: str, confirm: str | None) -> Admitted:
        """Run an ended turn's message again, in the attempt's place (Retry)."""
        return self._moved(await branching.retry(self.db, run_id, confirm))

    async def regenerate(self, key: str, index: int | None, confirm: str | None) -> Admitted:
        """Answer again (a completed answer is kept as a variant; see engine.branching)."""
        return self._moved(await branching.regenerate(self.db, key, index, confirm))

    async def edit(self, key: str, index: int, text: str, confirm: str | None, *,
                   principal: Principal) -> Admitted:
        mention = await mentions.prepare(self.prompts_dir, text, None)  # @name expanded
        admitted = await branching.edit(self.db, key, index, text, confirm, mention.meta,
                                        principal=principal)
        await mentions.tell(self.db, self.bus, admitted, mention)
        return self._moved(admitted)

    async def rewind(self, key: str, index: int, confirm: str | None) -> branching.Moved:
        moved = await branching.rewind(self.db, key, index, confirm)
        self._redraw(key, moved.admitted)
        return moved

    async def choose_variant(self, key: str, index: int, variant: int) -> branching.Moved:
        moved = await branching.choose_variant(self.db, key, index, variant)
        self._redraw(key, None)
        return moved

    async def fork(self, key: str, index: int, memory_mode: str | None) -> SessionRow:
        return await branching.fork(self.db, key, index, memory_mode, self.chats_dir)

    def _moved(self, admitted: Admitted) -> Admitted:
        self._redraw(admitted.session_key, admitted)
        return admitted

    def _redraw(self, key: str, admitted: Admitted | None) -> None:
        """After a door moved a chat's head: its pages redraw (a `path` frame), and the run it
        admitted, if any, starts."""
        self.forget_context(key)
        self.bus.publish(key, {"type": "path"})
        if admitted is not None:
            self.dispatch(key)

    def forget_context(self, session_key: str) -> None:
        """Drop what the context cache holds of the chat: a door moved its head, or it
        ended (its next turn, if any, reads it from the store)."""
        self.deps.context.drop(session_key)

    async def read_aloud(self, session_key: str, index: int,
                         principal: Principal) -> read_aloud.Spoken:
        """One message of the chat spoken by the `speak` chain (`engine.read_aloud`)."""
        return await read_aloud.read_aloud(self.db, self.snapshot.models, session_key, index,
                                           principal)

    async def tools_for(self, session_key: str) -> list[dict[str, Any]]:
        return await agent_cli_calls.tools_for(self.deps, session_key)

    async def invoke_tool(self, session_key: str, name: str, arguments: dict[str, Any], *,
                          principal: Principal) -> dict[str, Any]:
        """Run one tool call as the chat, for an agent CLI (see engine.invoke)."""
        if not self.accepting:
            raise AdmissionError("shutting_down", 503, "The gateway is stopping.")
        return await agent_cli_calls.invoke_tool(self.deps, session_key, name, arguments, principal)

    def stop_admitting(self) -> None:
        self.accepting = False
        self.bus.close()

    async def close_store(self) -> None:
        """Close the store once everything else has stopped: the writer finishes what is
        queued (a thread: it waits for the writer), then send the traces still batched."""
        await asyncio.to_thread(self.db.close)
        await asyncio.to_thread(self.observer.close)

    async def close(self) -> None:
        """Stop admitting; give running turns the grace period, then leave them to resume."""
        self.stop_admitting()
        await self.scheduler.close()
        await self.backups.close()
        await cancel_and_wait(self._leader, self._sweeper, self._summarizer,
                              self._held_sweeper, self._spending_sync, *self._waiting_to_lead)
        if self.lanes is not None:
            await self.lanes.close(self.config.gateway.shutdown_grace_seconds,
                                   parked=self.active.parked)
        if await self.replica.alone():  # a Temporary chat ends here, unless others serve it
            await deletion.forget_temporary(self, "temporary_ended")
        if self.relay is not None:
            await self.relay.close()
        await self.replica.leave()
        self.deps.context.clear()
        await self.chores.close()
        if self.mcp is not None:
            await self.mcp.close()
