"""The state work on a chat carries: `CallScope` for running tool calls as the chat (a turn's,
or one an agent CLI asks for through `hearth mcp`), and `Turn`, which adds the model loop's."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hearth.config import Config, LimitsConfig, ModelConfig
from hearth.engine.access import principals
from hearth.engine.delivery.events import Bus
from hearth.engine.turn.approval.desk import ApprovalDesk
from hearth.models.breakers import Breakers
from hearth.models.registry import ModelRegistry
from hearth.models.types import Message, Provider, ResponseFormat
from hearth.privacy.principal import Principal
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.tools import policy
from hearth.tools.base import Tool, ToolContext
from hearth.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from hearth.engine.turn.compaction.fold import Compactor
    from hearth.engine.turn.context_cache import ContextCache


@dataclass(kw_only=True)
class CallScope:
    """What running a tool call as a chat needs: the run it is recorded under, the chat's
    agent, trust and workspace, and the gate's collaborators."""

    db: Database
    bus: Bus
    tools: ToolRegistry
    config: Config
    desk: ApprovalDesk
    run: RunRow
    workspace: Path
    context: ToolContext
    agent: str = "default"
    trust: str = "ask"
    attachments_dir: Path | None = None  # where the chat's attachments' bytes are
    started: float = field(default_factory=time.monotonic)
    last_progress: float = field(default_factory=time.monotonic)
    tools_running: int = 0  # while a call runs, an unattended turn's idle clock stands still
    waiting_on_owner: int = 0  # of those, the calls only waiting for the owner's answer

    def touch(self) -> None:
        """Something happened: a chunk, a call, a result."""
        self.last_progress = time.monotonic()

    @property
    def parked(self) -> bool:
        """Whether all the turn is doing is wait for the owner's answer: nothing of it runs,
        so a stop need not wait for it (the approval is kept, and the restart waits again)."""
        return self.waiting_on_owner > 0 and self.tools_running == self.waiting_on_owner

    @property
    def limits(self) -> LimitsConfig:
        return self.config.limits

    @property
    def session_key(self) -> str:
        return self.run.session_key

    @property
    def principal(self) -> Principal:
        """On whose behalf the run works: fixed at admission, read from the run."""
        return principals.of_run(self.run)

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(kw_only=True)
class Turn(CallScope):
    provider: Provider
    offer_tools: bool = True
    model_calls: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    streamed: str = ""  # text of the model call in flight, as it arrived
    halt: str | None = None  # why the turn is being ended from outside: stopped, idle, time
    retried: set[str] = field(default_factory=set)  # the once-only retries already used
    checkpointed: bool = False  # the run holds a checkpoint of `streamed`
    resends: int = 0  # model calls sent again after the connection was lost
    context_fed: str | None = None  # what memory the context was given, or why none
    chosen_by: str = ""  # how the model was chosen (the footer says it)
    model_config: ModelConfig | None = None  # its entry, as the registry has it now (prices)
    compactor: Compactor | None = None  # the turn's compaction (engine.turn.compaction.in_turn)
    context_cache: ContextCache | None = None  # chats' recent context (engine.turn.context)
    context_pct: float | None = None  # % of the window the last prompt used (None: unmeasured)
    shown: bool = False  # some text of this turn was shown: it no longer moves to another model
    may_fail_over: bool = False  # another model may take the turn if this one fails early
    breakers: Breakers | None = None  # the models' breakers (told of each answer)
    models: ModelRegistry | None = None  # the turn's snapshot's models (a voice note's hearer)
    # messages with their files read in, by (vision, message): read once a turn (attached.py)
    files_read: dict[tuple[bool, Message], Message] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # model_substitution, failover
    response_format: ResponseFormat | None = None  # what its message asked answers to be

    def once(self, retry: str) -> bool:
        """True the first time a retry of this kind is asked for in this turn."""
        if retry in self.retried:
            return False
        self.retried.add(retry)
        return True

    def offered(self) -> list[Tool]:
        """The tools the policy gives this turn's agent, as offered to the model."""
        if not self.offer_tools:
            return []
        names = policy.allowed(self.tools.names(), self.config, self.agent)
        return [t for t in self.tools.all() if t.name in names]

    def telemetry(self) -> dict[str, object]:
        return {
            "model": self.provider.model_name,
            "model_id": self.provider.model_id,
            "provider": self.provider.provider,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "chosen_by": self.chosen_by,
            "context_pct": self.context_pct,
            **self.notes,
        }
