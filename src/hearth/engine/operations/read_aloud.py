"""Read aloud: one message of a chat spoken by the `speak` chain's model (`/audio/speech`).

The dashboard's Read aloud asks for a message by its place (never for text it sends), so
what is spoken is what the chat holds, and a chat's own scope covers the call: in an
Incognito or Temporary chat the text reaches only the model set up for this use, named for
this one call (`answered_by`), and the answer says which model spoke (`Spoken.model_id`, which
the page shows). No speak chain: 404 `no_speak_model`, and the page reads with the browser's
own voice instead.

Each read is a paid call (the guard prices it per character) spent for whoever asked: the
owner, or the app (`Account`, with the chat's agent), and held to their spending limits
before anything is sent: past one, 429 `spending_limit` with the limit's sentence and
`Retry-After` until it resets, and no other model is tried. Nothing is cached: the same
message read again is spoken, and paid for, again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlalchemy import Connection

from hearth.errors import Limited, Refusal
from hearth.models import guard
from hearth.models.registry import ModelRegistry
from hearth.models.spending import Account, OverLimit, charged_to
from hearth.models.types import ModelError
from hearth.privacy.principal import Principal
from hearth.privacy.scope import answered_by, as_work_of
from hearth.store import sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.sessions import SessionRow

SPOKEN_KINDS = ("user", "assistant")
MAX_CHARS = 4096  # what one request to /audio/speech takes


@dataclass(frozen=True)
class Spoken:
    audio: bytes  # MP3
    model_id: str
    cut: bool  # the message was longer than MAX_CHARS: its start was read


async def read_aloud(db: Database, models: ModelRegistry, key: str, index: int,
                     principal: Principal) -> Spoken:
    """The message at `index` of chat `key`, spoken (Refusal when it cannot be)."""
    session, text = await db.reading(_message, key, index)
    chain = models.own_chain("speak")
    if not chain:
        raise Refusal("no_speak_model", 404, "No model is set up to read aloud ([chains] "
                      "speak); the page reads with the browser's own voice instead.")
    failures = []
    spent_for = Account(agent=session.agent, app=principal.app)
    for model_id in chain:
        provider = await asyncio.to_thread(models.provider, model_id)
        if provider is None:
            continue
        try:
            with as_work_of(key, session.memory_mode, principal), answered_by(model_id), \
                    charged_to(spent_for):
                audio = await guard.speak(provider, text[:MAX_CHARS])
        except OverLimit as over:  # not sent: no other model is tried (the limit is theirs)
            raise Limited("spending_limit", 429, over.sentence, over.retry_after) from None
        except ModelError as failed:
            failures.append(failed.sentence)
            continue
        return Spoken(audio, model_id, len(text) > MAX_CHARS)
    raise Refusal("speak_failed", 502, " ".join(failures) or "No speak model could be built.")


def _message(conn: Connection, key: str, index: int) -> tuple[SessionRow, str]:
    session = session_store.get(conn, key)
    if session is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {key!r}.")
    event = transcript.at(conn, key, index)
    if event is None or event.kind not in SPOKEN_KINDS:
        raise Refusal("message_not_found", 404,
                      f"Chat {key!r} has no message of yours or the agent's at {index}.")
    text = str(event.content.get("text", "")).strip()
    if not text:
        raise Refusal("nothing_to_read", 422, "This message has no words to read aloud.")
    return session, text
