"""Which model a turn runs on, and moving it to the next when that one fails early.

Owns a turn's model order (`Plan`, from `ModelRegistry.resolve`: the chat's pick, its agent's
pin, then its use case's chain), the signal the loop raises when the model failed before
anything of the turn was shown (`ModelFailed`), and the rules that decide whether the turn may
move on (`may_move`): never after text was shown, never after a step that may have changed
something began (the ledger says which; the turn then ends naming that step), each model once,
a model that cannot use the turn's tools or whose breaker is open skipped, and never in a
restricted chat (Incognito, Temporary): nothing of it may reach a second model (invariant 8),
so its turn ends as its one model failed. The plan is the turn's own: the next turn starts on
the first model again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hearth.engine.snapshot import Snapshot
from hearth.engine.turn.endings import Ending
from hearth.models.registry import Candidate, ModelRegistry, Resolution
from hearth.models.types import (
    AnswerCutOff,
    KeyMissing,
    Message,
    ModelError,
    ProviderUnavailable,
)
from hearth.privacy.modes import mode_of, restricted
from hearth.store import ledger
from hearth.store.db import Database
from hearth.store.ledger import CallRow
from hearth.store.sessions import SessionRow

BEGUN = frozenset({"started", "finished", "failed", "unknown"})


class ModelFailed(Exception):
    """The turn's model failed before anything of the turn was shown: `ending` is how the
    turn ends if no other model can take it, `why` the failure in a few words, `messages`
    what the next model is sent (the steps already taken included, so none runs again)."""

    def __init__(self, ending: Ending, why: str, messages: list[Message]) -> None:
        super().__init__(ending.sentence)
        self.ending = ending
        self.why = why
        self.messages = messages


def axis_of(session: SessionRow) -> str:
    """The use case a chat's turns resolve on, decided from the chat before the turn: a chat
    working in a folder of its own is code & tools, any other chat is chat."""
    return "code_tools" if session.workspace_dir else "chat"


def why_failed(error: ModelError) -> str:
    """A model's failure in a few words, for "X failed (…)"."""
    if isinstance(error, KeyMissing):
        return "its key is missing"
    if isinstance(error, ProviderUnavailable):
        return error.why()
    if isinstance(error, AnswerCutOff):
        return "its answer was cut off"
    return "its call failed"


@dataclass
class Plan:
    """The models one turn may run on, in order, and what became of each tried."""

    resolution: Resolution
    tried: list[tuple[str, str]] = field(default_factory=list)  # (model id, why it was left)
    current: str | None = None  # the model the turn runs on now
    one_model: bool = False  # a restricted chat's turn: it never moves to another model

    @classmethod
    def of(cls, snapshot: Snapshot, session: SessionRow) -> Plan:
        """The plan of a turn in `session`, from the snapshot the turn runs from (its agent's
        pin and its chains, one config)."""
        agent = snapshot.config.agents.get(session.agent) if session.agent else None
        pin = agent.model if agent is not None else None
        return cls(snapshot.models.resolve(axis_of(session), session.model, pin, session.agent),
                   one_model=restricted(mode_of(session.memory_mode)))

    def _left(self, models: ModelRegistry, needs_tools: bool) -> list[Candidate]:
        done = {model_id for model_id, _ in self.tried} | {self.current}
        return [c for c in self.resolution.order if c.model_id not in done]

    def next(self, models: ModelRegistry, needs_tools: bool) -> Candidate | None:
        """The next model to try: not tried yet, able to use the turn's tools when it offers
        them, its breaker letting it through. Those passed over are noted with why."""
        if self.one_model and self.tried:
            return None  # a restricted chat's words reach the model its turn began on alone
        for candidate in self._left(models, needs_tools):
            if not _takes_tools(models, candidate.model_id, needs_tools):
                self.tried.append((candidate.model_id, "it cannot use tools"))
                continue
            if not models.breakers.allows(candidate.model_id):
                self.tried.append((candidate.model_id,
                                   models.breakers.open_sentence(candidate.model_id)))
                continue
            self.current = candidate.model_id
            return candidate
        return None

    def failed(self, model_id: str, why: str) -> None:
        self.tried.append((model_id, why))
        self.current = None

    def account(self) -> str:
        """Each model left, and why: "a failed (HTTP 503); b: it cannot use tools"."""
        return "; ".join(f"{model_id}: {why}" if why.startswith("it")
                         else f"{model_id} failed ({why})" for model_id, why in self.tried)


def _takes_tools(models: ModelRegistry, model_id: str, needs_tools: bool) -> bool:
    config = models.config_of(model_id)
    return not needs_tools or config is None or config.tools


async def changing_step(db: Database, run_id: str) -> CallRow | None:
    """The first of the run's steps that may have changed something and began, if any."""
    calls = await db.reading(ledger.for_run, run_id)
    return next((c for c in calls if c.effect != "reads" and c.status in BEGUN), None)
