"""Voice notes heard: an audio file's words, by the `transcribe` chain's model, once.

Before a model call reads a message's audio files (`engine/turn/attached.py`), each one not
heard yet is sent to the first model of `[chains] transcribe` that can hear it
(`/audio/transcriptions`, through the call guard), and its words are kept on its row, so it
is heard once, whatever the turns that read it later. No transcribe chain: nothing is sent,
and the model is told the note was not heard.

A restricted chat's audio reaches only the models its owner set up for this use: the call is
named for that model alone (`answered_by`), as the guard requires, and the chat says which
model heard the note.

Hearing is paid for as the turn's model calls are, by the turn's account (the guard prices it
per second heard): a note a spending limit would not let through is not sent to any model,
and the turn ends `spending_limit` as it would at its next model call (`OverLimit` is raised
on to the loop, never taken for a model that failed).
"""

from __future__ import annotations

import asyncio
import logging

from hearth.engine.turn import writes
from hearth.engine.turn.turn_state import Turn
from hearth.models import guard
from hearth.models.spending import OverLimit
from hearth.models.types import Attached, ModelError
from hearth.privacy.modes import keeps_memory
from hearth.privacy.scope import answered_by, current as work_scope
from hearth.store import attachments as attachment_store

log = logging.getLogger(__name__)


async def heard(turn: Turn, files: list[Attached]) -> dict[str, str | None]:
    """The words of each audio file (by id), heard now where they were not yet (None: no
    model could hear it)."""
    if not files:
        return {}
    ids = list(dict.fromkeys(f.id for f in files))
    known = await turn.db.reading(attachment_store.transcripts, turn.session_key, ids)
    chain = turn.models.own_chain("transcribe") if turn.models is not None else []
    for file in {f.id: f for f in files}.values():
        if known.get(file.id) is None and chain:
            known[file.id] = await _hear(turn, file, chain)
    return known


async def _hear(turn: Turn, file: Attached, chain: list[str]) -> str | None:
    assert turn.attachments_dir is not None
    try:
        data = await asyncio.to_thread((turn.attachments_dir / file.sha256).read_bytes)
    except OSError:
        return None
    models = turn.models
    if models is None:
        return None
    for model_id in chain:
        provider = await asyncio.to_thread(models.provider, model_id)
        if provider is None:
            continue
        try:
            with answered_by(model_id):  # this call alone reaches the transcription model
                words = await guard.transcribe(provider, file.name, data, file.content_type)
        except OverLimit:
            raise  # not sent: no other model is tried (the limit is the owner's)
        except ModelError as failed:
            log.warning("transcription on %s failed: %s", model_id, failed.sentence)
            continue
        await turn.db.writing(attachment_store.set_transcript, turn.session_key, file.id,
                              words, durable=False)
        turn.bus.publish(turn.session_key, {"type": "path"})  # pages redraw: its words show
        await _say_who_heard(turn, file, model_id)
        return words
    return None


async def _say_who_heard(turn: Turn, file: Attached, model_id: str) -> None:
    """In a chat that keeps nothing, the notice the seeds ask for: which model heard it."""
    scope = work_scope()
    if scope is None or keeps_memory(scope.mode):
        return
    await writes.append(turn, "notice", {"text": (
        f"The voice note {file.name} was transcribed by {model_id}, the model set up to "
        "hear voice notes; nothing else of this chat was sent to it.")},
        meta={"transcribed_by": model_id})
