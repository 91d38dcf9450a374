"""A chat opened by its first message, in one step (the dashboard opens a chat only once its
first message is sent).

Everything is checked before anything is written: the message as admission checks it, the
chat's settings as `chats.open_chat` checks them (its model and agent among the snapshot's
choices). Then ONE transaction makes the chat and admits the message and its run, so a send
that fails leaves no empty chat behind, and a run id handed out is durable (invariant 1).
The same `client_message_id` again, while the chat it opened was active in the last day,
answers that chat and run (`duplicate`) instead of opening another.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from hearth.engine.delivery.events import Bus, message_frame
from hearth.engine.intake import admission, mentions
from hearth.engine.intake.admission import AdmissionError, Admitted
from hearth.faults import crash_point
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.chats import ChatError, Choices, NewChat
from hearth.store import sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow
from hearth.tools.sandbox import Placement

SAME_MESSAGE_SECONDS = 24 * 3600  # how long a first message's client id answers its chat
ATTEMPTS = 20  # a name taken in the same instant is looked for again


class ChatOpener(Protocol):
    """What opening a chat with its first message needs of the engine."""

    db: Database
    bus: Bus
    accepting: bool  # False once the gateway stops: nothing more is admitted
    placement: Placement  # what a chat's folder may not be (`placement.hidden`)
    prompts_dir: Path  # the saved prompts a first message may mention

    def choices(self) -> Choices: ...

    def dispatch(self, session_key: str) -> None: ...


@dataclass(frozen=True)
class FirstSent:
    """The chat a first message opened (or had opened), and its acknowledgement."""

    session: SessionRow
    admitted: Admitted


async def send_first(engine: ChatOpener, text: str, *, principal: Principal,
                     memory_mode: str | None = None,
                     agent: str | None = None, model: str | None = None,
                     client_message_id: str | None = None, trust: str | None = None,
                     workspace_dir: str | None = None, origin: str = "api",
                     dispatch: bool = True) -> FirstSent:
    """Open a new chat with `text` as its first message, admitted; with `dispatch=False` the
    caller wakes the chat's lane itself (`engine.dispatch`) once it has acknowledged."""
    if not engine.accepting:
        raise AdmissionError("shutting_down", 503,
                             "The gateway is stopping and takes no new messages; send it again "
                             "once it is back.")
    admission.validate(text, client_message_id)
    new = chats.checked_new(memory_mode=memory_mode, agent=agent, model=model,
                            workspace_dir=workspace_dir, trust=trust, origin=origin,
                            keep_out=engine.placement.hidden, choices=engine.choices(),
                            created_by_app=principal.app)
    idem = f"client:{client_message_id}" if client_message_id else None
    mention = await mentions.prepare(engine.prompts_dir, text, None)  # @name expanded
    sent, event = await _open_and_admit(engine, new, text, idem, mention.meta, principal)
    if event is not None:
        crash_point("admitted")
        engine.bus.publish(sent.session.key, message_frame(event))
        await mentions.tell(engine.db, engine.bus, sent.admitted, mention)
        if dispatch:
            engine.dispatch(sent.session.key)
    return sent


async def _open_and_admit(engine: ChatOpener, new: NewChat, text: str, idem: str | None,
                          meta: dict[str, Any] | None, principal: Principal,
                          ) -> tuple[FirstSent, EventRow | None]:
    since = time.time() - SAME_MESSAGE_SECONDS
    for _attempt in range(ATTEMPTS):
        try:
            return await engine.db.writing(_in_one, new, text, idem, since, meta, principal)
        except IntegrityError:
            continue  # another chat took the name in the same instant; look again
    raise ChatError("name_conflict", 409, "Could not find a free name for the chat; try again.")


def _in_one(conn: Connection, new: NewChat, text: str, idem: str | None, since: float,
            meta: dict[str, Any] | None, principal: Principal,
            ) -> tuple[FirstSent, EventRow | None]:
    """The chat, the message and its run in one transaction; or the chat this message
    opened before."""
    if idem is not None:
        kept = transcript.first_with_key(conn, idem, since)
        if kept is not None and kept.run_id is not None:
            session = session_store.get(conn, kept.session_key)
            assert session is not None
            return FirstSent(session, admission.again(conn, kept.run_id, session.key,
                                                      kept.seq)), None
    session = chats.insert_new(conn, new)
    admitted, event = admission.admit_in(conn, session.key, text, idem, None, "chat", meta,
                                         principal=principal)
    refreshed = session_store.get(conn, session.key)
    assert refreshed is not None
    return FirstSent(refreshed, admitted), event
