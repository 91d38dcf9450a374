"""Idle summaries: a chore that gives an idle persistent chat a summary of its oldest turns.

A chat left alone a while (`IDLE_SECONDS`) that holds many events past its newest summary is
summarized: its opening and its latest turns (about `KEEP_TOKENS` worth) stay word for word,
the turns before them are folded into a derived record (`store.summaries`, kind "idle"),
through the same compaction as a turn's (`engine.turn.compaction`): a chore of its own that walks
the background chain (the chat chain's first model when that is empty), within the background
budget (`engine.background.budget`), with the summary's validator, under
the chat's work scope. The transcript is untouched and the chat shows no notice: nothing of
it changed. Its next turn reads the summary instead of those turns while it still describes
them; once one of them changes (a rewind, an edit, a deletion) the record is stale and the
turn reads the turns again. Restricted chats are never listed.

A summary no model could write folds nothing and is owed (`engine.background.chores`, kind `KIND`):
the chores' loop tries it again (`doer`) when a model may be called, if the chat is still there,
persistent, and idle. `sweep` is the chore's one entry; `sweep_forever` (started and stopped
with the engine) calls it every `SWEEP_EVERY` seconds, on the engine's current deps. It runs
one chat at a time and returns how many it summarized.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock
from hearth.engine.background.budget import BackgroundBudget
from hearth.engine.background.chores import Chores, Doer, Outcome
from hearth.engine.turn import context
from hearth.engine.turn.compaction.fold import Budget, Compactor
from hearth.engine.turn.runner import TurnDeps
from hearth.models.chore_runner import Allowance, Owed, background_chain
from hearth.models.types import Provider
from hearth.privacy.modes import keeps_memory, mode_of
from hearth.privacy.scope import as_work_of
from hearth.store import sessions as session_store, summaries

log = logging.getLogger(__name__)

KIND = "summary"  # the chore's name, in the call records and the owed list
IDLE_SECONDS = 30 * 60.0  # a chat untouched this long is idle
UNSUMMARIZED_EVENTS = 60  # and holds more events than this past its newest summary
KEEP_TOKENS = 6000  # the latest turns kept word for word, about
WHY = "the chat was idle"
SWEEP_EVERY = 300.0  # seconds between looks for idle chats

Deps = Callable[[], TurnDeps]  # the engine's current deps (a settings change replaces them)


async def sweep(deps: TurnDeps, chores: Chores | None = None, *,
                idle_seconds: float = IDLE_SECONDS,
                unsummarized: int = UNSUMMARIZED_EVENTS) -> int:
    """Summarize the oldest turns of each idle persistent chat that needs it; one no model
    could summarize is owed to `chores`."""
    keys = await deps.db.reading(summaries.idle_chats, time.time() - idle_seconds,
                                 unsummarized)
    done = 0
    allowance = chores.budget.for_turn(None) if chores is not None else None
    for key in keys:
        outcome = await summarize(deps, key, idle_seconds=idle_seconds, allowance=allowance)
        if outcome is Outcome.DONE:
            done += 1
        elif isinstance(outcome, Owed) and chores is not None:
            await chores.owe(KIND, key, None, outcome)
    return done


async def summarize(deps: TurnDeps, key: str, *, idle_seconds: float = IDLE_SECONDS,
                    allowance: Allowance | None = None) -> Outcome | Owed:
    """Fold chat `key`'s oldest turns into an idle summary: DONE, Owed (no model could write
    it, and why), or MOOT (the chat is gone, restricted, busy, not idle, nothing to fold, no
    model); each call taken from `allowance`, the background budget."""
    chat = await deps.db.reading(session_store.get, key)
    if (chat is None or not keeps_memory(mode_of(chat.memory_mode))
            or chat.writer_run_id is not None or chat.updated_at > time.time() - idle_seconds):
        return Outcome.MOOT
    chain = await asyncio.to_thread(background_chain, deps.models)
    if not chain:
        return Outcome.MOOT
    compactor = _compactor(deps, key, chain)
    compactor.allowance = allowance
    with as_work_of(key, chat.memory_mode):
        await context.build(deps.db, None, system_prompt="", compactor=compactor, force=WHY,
                            history_messages=deps.config.limits.history_messages)
    deps.context.drop(key)  # its next turn reads the chat with the new summary
    if compactor.owed is not None:
        return compactor.owed
    if not compactor.done:
        return Outcome.MOOT
    log.info("idle summary for a chat: %d events folded", compactor.done[-1].events)
    return Outcome.DONE


def doer(deps: Deps, budget: BackgroundBudget,
         idle_seconds: float = IDLE_SECONDS) -> Doer:
    """What the chores' loop runs to try an owed idle summary again."""
    async def again(key: str, run_id: str | None) -> Outcome | Owed:
        del run_id  # an idle summary is of the chat, not of a turn
        return await summarize(deps(), key, idle_seconds=idle_seconds,
                               allowance=budget.for_turn(None))
    return again


def _compactor(deps: TurnDeps, key: str, chain: list[Provider]) -> Compactor:
    """An idle pass's compactor: it keeps about KEEP_TOKENS of the latest turns, says
    nothing in the chat, and folds nothing when no model could write the summary."""
    async def quiet(sentence: str, meta: dict[str, Any]) -> None:
        del sentence, meta  # nothing of the chat changed: no notice

    window = KEEP_TOKENS * 4  # keep_chars is half the threshold less the summary's room
    budget = Budget(context_window=window, max_output_tokens=0, autocompact_pct=100)
    return Compactor(db=deps.db, session_key=key, keeps=True, chain=chain,
                     config_of=deps.models.config_of, budget=budget, announce=quiet,
                     kind="idle", breakers=deps.models.breakers, owes=True)


async def sweep_forever(deps: Deps, clock: Clock, chores: Chores | None = None,
                        every: float = SWEEP_EVERY) -> None:
    """Look for idle chats to summarize every `every` seconds of `clock`, for as long as the
    engine runs."""
    while True:
        await clock.sleep(every)
        try:
            await sweep(deps(), chores)
        except SQLAlchemyError as error:  # the store is busy or away: look again next time
            log.warning("the idle-summary sweep failed (%s); trying again later",
                        type(error).__name__)
