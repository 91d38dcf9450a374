"""Admission (chat.send): validate, resolve the session, persist, acknowledge, dispatch.

The user's event (idempotency key = the client's message id) and the run row are written in
ONE transaction before anything answers; a run id handed out is already durable. The same
client message id again answers the same run, however many arrive at once. A message sent
while the chat's turn runs is admitted as a steer when that turn takes messages (`steered`:
its event marked for the turn, which reads it at its next step, `engine.turn.steering`).

Admission is where a run's principal is fixed (`privacy.principal`): the caller says on whose
behalf the message is sent (it authenticated them, or derives it from the work it continues),
narrowed to the app in a chat an app started, and stored on the run; nothing after reads it
from anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import Bus, message_frame
from hearth.engine.views import attachment_ref
from hearth.errors import Refusal
from hearth.faults import crash_point
from hearth.privacy.principal import Principal
from hearth.store import (
    attachments as attachment_store,
    runs as run_store,
    sessions as session_store,
    steers,
    transcript,
)
from hearth.store.attachments import AttachmentRow
from hearth.store.db import Database
from hearth.store.transcript import EventRow

MAX_TEXT_BYTES = 1024 * 1024
MAX_CLIENT_ID = 200
MAX_FILES = 20  # files one message may send (the API's uploads, a mail's attachments)


class AdmissionError(Refusal):
    """A message that cannot be admitted; nothing of it was written."""


@dataclass(frozen=True)
class Admitted:
    run_id: str
    status: str  # "started" | "queued" | "steered" (sent into the running turn `into`)
    duplicate: bool
    session_key: str
    seq: int
    into: str | None = None


def validate(text: object, client_message_id: object, files: Files | None = None) -> None:
    """A message's text (it may be empty when it sends files) and its client id."""
    if not isinstance(text, str) or (not text.strip() and not (files and files.ids)):
        raise AdmissionError("empty_message", 422, "The message is empty; write something to send.")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise AdmissionError(
            "invalid_text", 422,
            "The message holds characters that are not valid Unicode text (a lone surrogate).",
        ) from exc
    if size > MAX_TEXT_BYTES:
        raise AdmissionError(
            "message_too_large", 413,
            f"The message is {size:,} bytes; a message may hold at most {MAX_TEXT_BYTES:,}.",
        )
    if client_message_id is not None and (
        not isinstance(client_message_id, str)
        or not 0 < len(client_message_id) <= MAX_CLIENT_ID
    ):
        raise AdmissionError(
            "invalid_client_message_id", 422,
            f"client_message_id must be a string of 1 to {MAX_CLIENT_ID} characters.",
        )


async def admit(
    db: Database,
    bus: Bus,
    session_key: str,
    text: str,
    *,
    principal: Principal,
    client_message_id: str | None = None,
    source_channel: str | None = None,
    kind: str = "chat",
    meta: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    steer: bool = False,
    files: Files | None = None,
) -> Admitted:
    """Persist the message and its run (a promise: on disk when this returns, committed with
    whatever else the writer took at the same moment); the caller dispatches the session's
    lane after. With `steer`, a message sent while the chat's turn runs is sent into it, to be
    read at its next step (`engine.turn.steering`)."""
    validate(text, client_message_id, files)
    idem = idempotency_key or (f"client:{client_message_id}" if client_message_id else None)
    admitted, event = await db.writing(admit_in, session_key, text, idem, source_channel, kind,
                                       meta, steer, principal=principal, files=files)
    if event is None:
        return admitted
    crash_point("admitted" if admitted.status == "started" else "queued")
    bus.publish(session_key, message_frame(event))
    return admitted


def admit_in(conn: Connection, session_key: str, text: str, idem: str | None,
             source_channel: str | None, kind: str, meta: dict[str, Any] | None,
             steer: bool = False, source: tuple[str, str] | None = None, *,
             principal: Principal, files: Files | None = None
             ) -> tuple[Admitted, EventRow | None]:
    """The user's event and its run, in the caller's transaction (`text` already validated);
    the event is None when `idem` names a message already admitted (the same run again).
    `source` is a channel message's (thread, sender), written on the line once. The run is
    `principal`'s, or the app's in a chat an app started. `files`: the chat's uploads the
    message sends, named on its meta and linked to it here (a duplicate links nothing)."""
    session = session_store.get(conn, session_key)
    if session is None:
        raise AdmissionError(
            "session_not_found", 404, f"There is no chat named {session_key!r}."
        )
    if idem is not None:
        repeated = repeat_of(conn, session_key, idem)
        if repeated is not None:
            return repeated[0], None
    run_id = run_store.new_run_id()
    queued = run_store.any_active(conn, session_key)
    into = steers.offer_in(conn, session_key) if steer and kind == "chat" else None
    meta = steers.offered_meta(meta, into)
    sent = _held_files(conn, session_key, files) if files is not None else []
    if sent:
        meta = {**(meta or {}), "attachments": [attachment_ref(row) for row in sent]}
    # The one writer runs this whole job at once, so the lookup above and this append are one
    # step; the unique (session, idempotency_key) constraint holds the rule even if they were
    # not.
    event = transcript.append(
        conn, session_key, "user", {"text": text}, run_id=run_id, meta=meta,
        idempotency_key=idem, source_channel=source_channel,
        source_thread=source[0] if source else None, source_user=source[1] if source else None,
    )
    run_store.insert(conn, run_id=run_id, session_key=session_key, tab_id=session.tab_id,
                     generation=session.generation, user_event_seq=event.seq, kind=kind,
                     principal=principal.within(session.created_by_app).encode())
    attachment_store.link(conn, session_key, [row.id for row in sent], event.seq)
    status = "steered" if into else "queued" if queued else "started"
    return Admitted(run_id, status, False, session_key, event.seq, into), event


@dataclass(frozen=True)
class Files:
    """The uploads a message sends (their ids, as the chat holds them), and the most they
    may weigh together."""

    ids: tuple[str, ...]
    max_bytes: int


def _held_files(conn: Connection, session_key: str, files: Files) -> list[AttachmentRow]:
    """The uploads `files` names, each held by this chat and not sent yet (else refused)."""
    wanted = list(dict.fromkeys(files.ids))
    held = attachment_store.held(conn, session_key, wanted)
    if len(held) != len(wanted):
        missing = sorted(set(wanted) - {row.id for row in held})
        raise AdmissionError("attachment_not_found", 404,
                             f"This chat holds no unsent upload {missing[0]!r}: upload the "
                             "file to this chat first, and send each upload once.")
    total = sum(row.size for row in held)
    if total > files.max_bytes:
        raise AdmissionError("attachments_too_large", 413,
                             f"The files of this message weigh {total // (1024 * 1024)} MB "
                             f"together; a message may send at most "
                             f"{files.max_bytes // (1024 * 1024)} MB.")
    return held


def repeat_of(conn: Connection, session_key: str, idem: str
              ) -> tuple[Admitted, EventRow] | None:
    """The acknowledgement of the message `idem` names, admitted before in the chat, and that
    message (None: no such message, or a steer not taken yet)."""
    kept = transcript.find(conn, session_key, idem)
    own = steers.run_of(kept) if kept is not None else None  # a steer's own, once taken
    if kept is None or own is None:
        return None
    return again(conn, own, session_key, kept.seq), kept


def again(conn: Connection, run_id: str, session_key: str, seq: int) -> Admitted:
    """The acknowledgement of a message admitted before (`duplicate`)."""
    run = run_store.get(conn, run_id)
    status = "started"
    if run is not None and run.status == "admitted":
        current = run_store.current(conn, session_key)
        status = "queued" if current is not None and current.run_id != run_id else "started"
    into = steers.sent_into(transcript.at(conn, session_key, seq), run)
    if into is not None:
        status = "steered"
    return Admitted(run_id, status, True, session_key, seq, into)
