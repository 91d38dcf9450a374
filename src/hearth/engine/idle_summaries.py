"""Idle summaries: a chore that gives an idle persistent chat a summary of its oldest turns.

A chat left alone a while (`IDLE_SECONDS`) that holds many events past its newest summary is
summarized: its opening and its latest turns (about `KEEP_TOKENS` worth) stay word for word,
the turns before them are folded into a derived record (`store.summaries`, kind "idle"),
through the same compaction as a turn's (`engine.compaction`, on the background chain's head,
else the chat's own model, through the guard). The transcript is untouched and the chat shows
no notice: nothing of it changed. Its next turn reads the summary instead of those turns
while it still describes them; once one of them changes (a rewind, an edit, a deletion) the
record is stale and the turn reads the turns again. Restricted chats are never listed.

`sweep` is the chore's one entry; `sweep_forever` (started and stopped with the engine) calls it
every `SWEEP_EVERY` seconds. It runs one chat at a time and returns how many it summarized.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from hearth.engine import context
from hearth.engine.compaction import Budget, Compactor
from hearth.engine.turn import TurnDeps
from hearth.models.types import Provider
from hearth.store import summaries

log = logging.getLogger(__name__)

IDLE_SECONDS = 30 * 60.0  # a chat untouched this long is idle
UNSUMMARIZED_EVENTS = 60  # and holds more events than this past its newest summary
KEEP_TOKENS = 6000  # the latest turns kept word for word, about
WHY = "the chat was idle"
SWEEP_EVERY = 300.0  # seconds between looks for idle chats


async def sweep(deps: TurnDeps, *, idle_seconds: float = IDLE_SECONDS,
                unsummarized: int = UNSUMMARIZED_EVENTS) -> int:
    """Summarize the oldest turns of each idle persistent chat that needs it."""
    keys = await deps.db.reading(summaries.idle_chats, time.time() - idle_seconds,
                                 unsummarized)
    done = 0
    for key in keys:
        if await summarize(deps, key):
            done += 1
    return done


async def summarize(deps: TurnDeps, key: str) -> bool:
    """Fold chat `key`'s oldest turns into an idle summary; False when nothing was folded or
    no model is set up."""
    provider = await asyncio.to_thread(deps.models.for_background)
    provider = provider or await asyncio.to_thread(deps.models.for_chat, None)
    if provider is None:
        return False
    compactor = _compactor(deps, key, provider)
    await context.build(deps.db, None, system_prompt="", compactor=compactor, force=WHY,
                        history_messages=deps.config.limits.history_messages)
    if compactor.done:
        log.info("idle summary for a chat: %d events folded", compactor.done[-1].events)
    return bool(compactor.done)


def _compactor(deps: TurnDeps, key: str, provider: Provider) -> Compactor:
    """An idle pass's compactor: it keeps about KEEP_TOKENS of the latest turns and says
    nothing in the chat."""
    async def quiet(sentence: str, meta: dict[str, Any]) -> None:
        del sentence, meta  # nothing of the chat changed: no notice

    window = KEEP_TOKENS * 4  # keep_chars is half the threshold less the summary's room
    budget = Budget(context_window=window, max_output_tokens=0, autocompact_pct=100)
    return Compactor(db=deps.db, session_key=key, keeps=True, provider=provider,
                     model_config=deps.models.config_of(provider.model_id), budget=budget,
                     announce=quiet, kind="idle")


async def sweep_forever(deps: TurnDeps, every: float = SWEEP_EVERY) -> None:
    """Look for idle chats to summarize every so often, for as long as the engine runs."""
    while True:
        await asyncio.sleep(every)
        try:
            await sweep(deps)
        except SQLAlchemyError as error:  # the store is busy or away: look again next time
            log.warning("the idle-summary sweep failed (%s); trying again later",
                        type(error).__name__)
