"""`/compact` on demand: compact a chat's model view now, between its turns.

Any surface asks here (the API's POST /api/sessions/{key}/compact, the chat menu's Compact
now, `/compact` in `hearth chat`). The chat must be persistent (a restricted chat keeps no
summary, so one made now would be gone before its next turn; its turns compact themselves
when they need to) and idle (a running turn holds the chat). The summary walks the background
chain (the chat chain when that is empty), and the notice is written in the chat as a turn's
is. When no model could write the summary nothing is folded (the owner asked for a summary;
a turn that needs room compacts without one) and the request is refused saying so (503).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hearth.engine.delivery.events import message_frame
from hearth.engine.turn import agents, context
from hearth.engine.turn.compaction.fold import Budget, Compactor
from hearth.engine.turn.runner import TurnDeps
from hearth.errors import Refusal
from hearth.models.chore_runner import background_chain
from hearth.models.types import Provider
from hearth.privacy.modes import keeps_memory, mode_of
from hearth.privacy.reach import why
from hearth.sessions import chats
from hearth.store import transcript
from hearth.store.sessions import SessionRow

ASKED = "you asked for it"
NOTHING = ("Nothing to compact yet: the conversation is only its opening and its latest "
           "exchange, which are always read word for word.")


@dataclass(frozen=True)
class Compacted:
    compacted: bool
    sentence: str
    freed_pct: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"compacted": self.compacted, "sentence": self.sentence,
                "freed_pct": self.freed_pct}


async def compact(deps: TurnDeps, key: str) -> Compacted:
    """Compact chat `key` now; what happened, in a sentence. Refuses a restricted chat, a
    chat with a turn running, and a chat with no model to summarize on."""
    config, registry = deps.config, deps.models
    session = await chats.get_chat(deps.db, key)
    mode = mode_of(session.memory_mode)
    if not keeps_memory(mode):
        raise Refusal("compact_keeps_nothing", 409,
                      f"{why(mode)}, so it keeps no summary of itself; its turns compact "
                      "what the model reads when they need to.")
    if session.writer_run_id is not None:
        raise Refusal("turn_running", 409, "A turn is running in this chat; compact it once "
                      "the turn has ended.")
    chat_model = await asyncio.to_thread(registry.for_chat, session.model)
    chain = await asyncio.to_thread(background_chain, registry)
    if chat_model is None or not chain:
        raise Refusal("no_model", 409, "No model is set up to write the summary, so the chat "
                      "was not compacted.")
    told = await asyncio.to_thread(agents.instructions_for, config, session.agent,
                                   deps.agents_folder)
    system_prompt = agents.assemble(told)  # its size is what a turn's view leaves room for
    compactor = _compactor(deps, session, chat_model, chain, len(system_prompt))
    await context.build(deps.db, None, system_prompt=system_prompt,
                        history_messages=config.limits.history_messages,
                        compactor=compactor, force=ASKED)
    deps.context.drop(key)  # its next turn reads the chat with the new summary
    if compactor.owed is not None:
        raise Refusal("summary_failed", 503, f"{compactor.owed.sentence()} The chat was not "
                      "compacted; try again later.")
    if not compactor.done:
        return Compacted(False, NOTHING)
    last = compactor.done[-1]
    freed = round(compactor.budget.pct(last.before_chars - last.after_chars))
    return Compacted(True, last.sentence, max(1, freed))


def _compactor(deps: TurnDeps, session: SessionRow, chat_model: Provider,
               chain: list[Provider], fixed_chars: int) -> Compactor:
    """The chat's compactor; its notice is appended as Hearth's own event (no turn's)."""
    config, registry = deps.config, deps.models
    model = registry.config_of(chat_model.model_id)

    async def announce(sentence: str, meta: dict[str, Any]) -> None:
        event = await deps.db.writing(transcript.append, session.key, "notice",
                                      {"text": sentence}, meta=meta, durable=False)
        deps.bus.publish(session.key, message_frame(event))

    return Compactor(
        db=deps.db, session_key=session.key, keeps=True, chain=chain,
        config_of=registry.config_of, breakers=registry.breakers, owes=True,
        budget=Budget.of(model, config.limits.autocompact_pct, fixed_chars),
        announce=announce)


