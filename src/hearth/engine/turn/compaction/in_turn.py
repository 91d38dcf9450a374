"""A turn's side of compaction: its compactor, its view, the retry after a prompt refused as
too long, and the share of the window each prompt used (`context_pct`).

`view` is what `engine.turn.runner` asks for the turn's context. It builds the turn's `Compactor`:
the summary walks the background chain (the chat chain when that is empty; its providers
built in a worker thread) for a persistent chat, and runs on the turn's own model only in a
restricted chat, never failing over (invariant 8: the guard refuses any other), and the
notice is written as the turn's own event, live and on reload. When no model could write the
summary the turn goes on compacted all the same, the owner's requests kept in their words.
`after_rejection` is the loop's one hook: a prompt refused as too long (HTTP 413, or a 400
that says so: `compaction.too_long`) is compacted and sent again once; refused again, the turn
ends with a sentence saying so.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hearth.engine.turn import context, endings, writes
from hearth.engine.turn.compaction.fold import (
    Budget,
    Compactor,
    context_pct,
    sizes,
    still_too_long,
    too_long,
)
from hearth.engine.turn.endings import Ending
from hearth.engine.turn.turn_state import Turn
from hearth.models.chore_runner import background_chain
from hearth.models.registry import ModelRegistry
from hearth.models.types import Message, ModelError, Provider, Usage
from hearth.privacy import reach


async def view(turn: Turn, registry: ModelRegistry, system_prompt: str) -> list[Message]:
    """The turn's context, compacted first when it must be."""
    chain = [turn.provider]  # a restricted chat's words reach its own model alone
    if reach.restricted_mode() is None:  # built in a worker thread: a first build imports an SDK
        chain = await asyncio.to_thread(background_chain, registry) or chain
    compactor = compactor_for(turn, registry, system_prompt, chain)
    turn.compactor = compactor

    async def rebuild(why: str) -> list[Message]:
        return await context.build(turn.db, turn.run, system_prompt=system_prompt,
                                   history_messages=turn.limits.history_messages,
                                   compactor=compactor, force=why, cache=turn.context_cache)

    compactor.rebuild = rebuild
    return await context.build(turn.db, turn.run, system_prompt=system_prompt,
                               history_messages=turn.limits.history_messages,
                               compactor=compactor, cache=turn.context_cache)


def compactor_for(turn: Turn, registry: ModelRegistry, system_prompt: str,
                  chain: list[Provider]) -> Compactor:
    """The turn's compactor: the summary asked of `chain` for a persistent chat; a restricted
    chat's of the turn's own model alone, its breaker left to the turn."""
    keeps = reach.restricted_mode() is None
    if not keeps:
        chain = [turn.provider]
    specs = [{"name": t.name, "description": t.description, "parameters": t.parameters}
             for t in turn.offered()]
    fixed = len(system_prompt) + len(json.dumps(specs)) if specs else len(system_prompt)
    budget = Budget.of(turn.model_config, turn.limits.autocompact_pct, fixed)

    async def announce(sentence: str, meta: dict[str, Any]) -> None:
        await writes.append(turn, "notice", {"text": sentence}, meta=meta)

    return Compactor(db=turn.db, session_key=turn.session_key, keeps=keeps, chain=chain,
                     config_of=registry.config_of, budget=budget, announce=announce,
                     breakers=registry.breakers if keeps else None)


async def after_rejection(turn: Turn, error: ModelError) -> list[Message] | Ending | None:
    """For a prompt refused as too long: the view compacted, to send once more; refused
    again (or nothing left to fold), the ending that says so. None for any other error."""
    compactor = turn.compactor
    if not too_long(error) or compactor is None or compactor.rebuild is None:
        return None
    if not turn.once("compacted"):
        return endings.model_error(still_too_long(turn.provider.model_id, error))
    before = len(compactor.done)
    messages = await compactor.rebuild(f"{turn.provider.model_id} refused the prompt as too "
                                       "long")
    if len(compactor.done) == before:  # nothing could be folded: sending it again is useless
        return endings.model_error(still_too_long(turn.provider.model_id, error))
    return messages


def measured(turn: Turn, messages: list[Message], usage: Usage) -> None:
    """Note the share of the window the prompt just sent used (the provider's count, else
    Hearth's estimate)."""
    compactor = turn.compactor
    if compactor is None:
        return
    budget = compactor.budget
    turn.context_pct = context_pct(usage.tokens_in, budget.fixed_chars + sizes(messages[1:]),
                                   budget.context_window)
