"""The chore runner: one background model call walked down a chain, with a validator.

Owns how a chore (a chat's title, after-turn learning, a summary) asks its chain (the
background chain; the chat chain's first model alone when that is empty:
`background_chain`): each model once, in order, through the guard, each call first taken
from the background budget (`Allowance`), each sent the chore's own request and nothing of
any other chore. The chore says how to read an answer (`validate`, raising `WrongAnswer`);
an empty answer, one in the wrong shape, one stopped at the output cap, a tool call instead
of an answer, a failed call and an open breaker are each that model failing, and the next
model answers. When none could, the chore is `Owed` (the caller keeps it to try again
later). Each failure is named by model with a reason in a few words, never the answer's
text. Each call is recorded and priced by the guard under the chore's kind (its purpose); a
call that failed or an answer that arrived is told to the breakers when the caller gives
them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from hearth.models import guard
from hearth.models.registry import ModelRegistry
from hearth.models.spending import OverLimit
from hearth.models.types import (
    AnswerCutOff,
    Completed,
    KeyMissing,
    ModelError,
    ModelRequest,
    Provider,
    TextDelta,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


class WrongAnswer(ValueError):
    """The model's answer is not what the chore asked for; the message says how in a few
    words (never the answer's own)."""


class BreakerGate(Protocol):
    """What the runner asks of the models' breakers (`models.breakers.Breakers`)."""

    def allows(self, model_id: str) -> bool: ...

    def succeeded(self, model_id: str) -> None: ...

    def failed(self, model_id: str) -> None: ...


@dataclass(frozen=True)
class Refused:
    """A call the background budget did not let go: why (`sentence`, a few words) and which
    bound (`how`: "budget", the hour's; "turn_budget", the turn's)."""

    sentence: str
    how: str


class Allowance(Protocol):
    """What the runner asks of the background budget (`engine.background.budget`) before
    each call: None to go ahead (the call is counted), or why not."""

    def take(self) -> Refused | None: ...


@dataclass(frozen=True)
class Failure:
    """One model failing the chore, and why: `reason` in a few words, `how` its kind
    (`failed`: the call failed or was not sent; `unusable`: the model answered, but not
    what the chore asked for; `budget`, `turn_budget`: the background budget refused the
    call, for the hour or for the turn it follows)."""

    model_id: str
    reason: str
    how: str = "failed"


@dataclass(frozen=True)
class Done(Generic[T]):
    """The chore's answer, read by its validator; the model that gave it and those that
    failed before it."""

    value: T
    model_id: str
    failures: tuple[Failure, ...] = ()


@dataclass(frozen=True)
class Owed:
    """No model of the chain could do the chore: each one's failure, in order (none when the
    chain is empty)."""

    kind: str
    failures: tuple[Failure, ...] = ()

    def sentence(self) -> str:
        if not self.failures:
            return f"The {self.kind} chore has no model to run on."
        said = "; ".join(f"{f.model_id}: {f.reason}" for f in self.failures)
        return f"No model of its chain could do the {self.kind} chore ({said})."

    @property
    def unusable(self) -> bool:
        """Every model asked answered, and none usably: asking again is likely to give the
        same, so the chore is not tried for long."""
        return bool(self.failures) and all(f.how == "unusable" for f in self.failures)

    @property
    def over_budget(self) -> bool:
        """The hourly background budget stopped it: no model's fault, tried once it has
        room."""
        return any(f.how == "budget" for f in self.failures)

    @property
    def turn_spent(self) -> bool:
        """The turn it follows has had its background calls: it is not tried again for it."""
        return any(f.how == "turn_budget" for f in self.failures)


REFUSED = ("refusal", "content_filter")  # finish reasons that are no answer


def background_chain(registry: ModelRegistry) -> list[Provider]:
    """The background chain's models, in order (the chat chain's first when it is empty), each built
    if it was not yet: building an SDK client blocks (its import, an HTTP client with its TLS
    context), so call this in a worker thread (`asyncio.to_thread`), never on the loop."""
    chain = [registry.provider(model_id) for model_id in registry.chain("background")]
    return [provider for provider in chain if provider is not None]


async def run_chore(
    kind: str,
    chain: Sequence[Provider],
    build_request: Callable[[Provider], ModelRequest],
    validate: Callable[[str], T],
    *,
    breakers: BreakerGate | None = None,
    allowance: Allowance | None = None,
) -> Done[T] | Owed:
    """Ask each model of `chain` once, in order, until one's answer passes `validate`; each
    call first taken from `allowance` (a refusal stops the chain: no model is asked)."""
    failures: list[Failure] = []
    for provider in chain:
        model_id = provider.model_id
        if breakers is not None and not breakers.allows(model_id):
            failures.append(Failure(model_id, "its breaker is open"))
            continue
        refused = allowance.take() if allowance is not None else None
        if refused is not None:
            failures.append(Failure(model_id, refused.sentence, how=refused.how))
            break
        answer = await _try(kind, provider, build_request(provider), validate, breakers)
        if isinstance(answer, Failure):
            failures.append(answer)
            continue
        _log_failures(kind, failures, answered_by=model_id)
        return Done(answer.value, model_id, tuple(failures))
    _log_failures(kind, failures, answered_by=None)
    return Owed(kind, tuple(failures))


@dataclass(frozen=True)
class _Valid(Generic[T]):
    value: T


async def _try(kind: str, provider: Provider, request: ModelRequest,
               validate: Callable[[str], T], breakers: BreakerGate | None
               ) -> _Valid[T] | Failure:
    """One model's go at the chore: its answer as `validate` reads it, or how it failed (the
    breakers told of a call that failed or answered)."""
    model_id = provider.model_id
    try:
        said = await _ask(kind, provider, request)
    except OverLimit as over:  # not sent: the model did not fail (its breaker is left)
        return Failure(model_id, f"not called: {over.cap.label()} is reached")
    except ModelError as error:
        if breakers is not None and not isinstance(error, KeyMissing):
            breakers.failed(model_id)  # (a missing key is a set-up mistake, not a failure)
        return Failure(model_id, f"the model call failed ({error.code})")
    if breakers is not None:
        breakers.succeeded(model_id)
    try:
        return _Valid(validate(_answer_of(said)))
    except WrongAnswer as wrong:
        return Failure(model_id, str(wrong), how="unusable")


@dataclass(frozen=True)
class _Said:
    text: str
    done: Completed


async def _ask(kind: str, provider: Provider, request: ModelRequest) -> _Said:
    pieces: list[str] = []
    done: Completed | None = None
    async for event in guard.stream(provider, request, purpose=kind):
        if isinstance(event, TextDelta):
            pieces.append(event.text)
        else:
            done = event
    if done is None:  # an adapter must raise AnswerCutOff itself; hold the rule here too
        raise AnswerCutOff("The model's answer was cut off: no terminal event arrived.")
    return _Said("".join(pieces), done)


def _answer_of(said: _Said) -> str:
    """The answer's text, or WrongAnswer when it is no whole answer."""
    if said.done.finish_reason == "length":
        raise WrongAnswer("the answer was cut off at the output cap")
    if said.done.tool_calls:
        raise WrongAnswer("the model asked for a tool instead of answering")
    if said.done.finish_reason in REFUSED:
        raise WrongAnswer(f"the model declined to answer ({said.done.finish_reason})")
    if not said.text.strip():
        raise WrongAnswer("the answer was empty")
    return said.text


def _log_failures(kind: str, failures: list[Failure], answered_by: str | None) -> None:
    for failure in failures:
        log.info("%s chore: %s failed: %s", kind, failure.model_id, failure.reason)
    if answered_by is not None and failures:
        log.info("%s chore: answered by %s after %d model(s) failed", kind, answered_by,
                 len(failures))
    elif answered_by is None:
        log.info("%s chore: no model of its chain could do it", kind)
