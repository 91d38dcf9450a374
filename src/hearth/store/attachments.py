"""Attachments' rows: a file sent with a message, its bytes kept by `sessions/attachments.py`.

An upload is *held* (a row with no message yet); admitting the message that names it links it
(`link`, in the admission's transaction, so the file is promised with the message). A held
attachment is the chat's alone: another chat's id links nothing. A fork holds its parent's
sent files by rows of its own (`share_with`: new ids, the same hashes). The rows go with their
chat (`sessions/forget.py`). What a chat's and an app's files take (`usage`, `size_of_app`)
is what the quotas read; uploads never sent are found (`held_before`) and removed
(`drop_held`) by the sweep of `engine/background/held_uploads.py`.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlalchemy import Connection, func, select, update

from hearth.store.db import now
from hearth.store.schema import attachments, sessions, transcript_events


@dataclass(frozen=True)
class AttachmentRow:
    id: str
    session_key: str
    event_seq: int | None
    sha256: str
    name: str
    content_type: str
    size: int
    created_at: float
    transcript: str | None = None  # an audio file's words, once heard

    @classmethod
    def of(cls, row: Any) -> AttachmentRow:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__dataclass_fields__})

    @property
    def is_image(self) -> bool:
        return self.content_type.startswith("image/")

    @property
    def is_audio(self) -> bool:
        return self.content_type.startswith("audio/")


def new_id() -> str:
    return "att_" + uuid.uuid4().hex


def hold(conn: Connection, session_key: str, sha256: str, name: str, content_type: str,
         size: int) -> AttachmentRow:
    """A file uploaded to the chat, not sent yet."""
    row = AttachmentRow(id=new_id(), session_key=session_key, event_seq=None, sha256=sha256,
                        name=name, content_type=content_type, size=size, created_at=now())
    conn.execute(attachments.insert().values(**asdict(row)))
    return row


def insert(conn: Connection, attachment_id: str, session_key: str, event_seq: int,
           sha256: str, name: str, content_type: str, size: int) -> None:
    """A sent attachment written whole (an imported chat's)."""
    conn.execute(attachments.insert().values(
        id=attachment_id, session_key=session_key, event_seq=event_seq, sha256=sha256,
        name=name, content_type=content_type, size=size, created_at=now()))


def share_with(conn: Connection, rows: list[AttachmentRow], session_key: str, event_seq: int,
               ids: dict[str, str]) -> None:
    """Another chat's sent attachments written for this chat's message at `event_seq` too (a
    fork's), each under its new id in `ids`: the same bytes (by hash), name, type, time and
    words once heard."""
    for row in rows:
        conn.execute(attachments.insert().values(**asdict(replace(
            row, id=ids[row.id], session_key=session_key, event_seq=event_seq))))


def held(conn: Connection, session_key: str, ids: list[str]) -> list[AttachmentRow]:
    """Of `ids`, those held by this chat and not sent yet, in the order asked."""
    if not ids:
        return []
    rows = {row.id: AttachmentRow.of(row) for row in conn.execute(
        select(attachments).where(attachments.c.session_key == session_key,
                                  attachments.c.id.in_(ids),
                                  attachments.c.event_seq.is_(None)))}
    return [rows[i] for i in ids if i in rows]


def link(conn: Connection, session_key: str, ids: list[str], seq: int) -> None:
    """The held attachments `ids` are now the message at `seq`'s."""
    if ids:
        conn.execute(update(attachments).where(
            attachments.c.session_key == session_key, attachments.c.id.in_(ids),
            attachments.c.event_seq.is_(None)).values(event_seq=seq))


def of_messages(conn: Connection, session_key: str, seqs: list[int]
                ) -> dict[int, list[AttachmentRow]]:
    """The attachments of the chat's messages at `seqs`, by seq, each in upload order."""
    if not seqs:
        return {}
    found: dict[int, list[AttachmentRow]] = {}
    for row in conn.execute(select(attachments).where(
            attachments.c.session_key == session_key, attachments.c.event_seq.in_(seqs))
            .order_by(attachments.c.created_at, attachments.c.id)):
        found.setdefault(int(row.event_seq), []).append(AttachmentRow.of(row))
    return found


def named(conn: Connection, session_key: str, name: str) -> AttachmentRow | None:
    """The chat's latest sent attachment called `name` (any case), or None."""
    row = conn.execute(select(attachments).where(
        attachments.c.session_key == session_key, attachments.c.event_seq.is_not(None),
        func.lower(attachments.c.name) == name.lower())
        .order_by(attachments.c.event_seq.desc(), attachments.c.created_at.desc())).first()
    return AttachmentRow.of(row) if row else None


def of_chat(conn: Connection, session_key: str) -> list[AttachmentRow]:
    """Every attachment of the chat, sent or held, oldest first."""
    return [AttachmentRow.of(row) for row in conn.execute(
        select(attachments).where(attachments.c.session_key == session_key)
        .order_by(attachments.c.created_at, attachments.c.id))]


def get(conn: Connection, session_key: str, attachment_id: str) -> AttachmentRow | None:
    row = conn.execute(select(attachments).where(
        attachments.c.session_key == session_key, attachments.c.id == attachment_id)).first()
    return AttachmentRow.of(row) if row else None


def sent_in(conn: Connection, session_key: str) -> list[tuple[AttachmentRow, str]]:
    """The chat's sent attachments, each with the id of the message that sent it (for an
    export), in the order they were sent."""
    rows = conn.execute(
        select(attachments, transcript_events.c.event_id.label("message_id"))
        .join(transcript_events, (transcript_events.c.session_key == attachments.c.session_key)
              & (transcript_events.c.seq == attachments.c.event_seq))
        .where(attachments.c.session_key == session_key)
        .order_by(attachments.c.event_seq, attachments.c.created_at, attachments.c.id))
    return [(AttachmentRow.of(row), str(row.message_id)) for row in rows]


def transcripts(conn: Connection, session_key: str, ids: list[str]) -> dict[str, str | None]:
    """The transcripts of the chat's attachments `ids` (None: not heard yet)."""
    if not ids:
        return {}
    return {str(row.id): row.transcript for row in conn.execute(
        select(attachments.c.id, attachments.c.transcript).where(
            attachments.c.session_key == session_key, attachments.c.id.in_(ids)))}


def set_transcript(conn: Connection, session_key: str, attachment_id: str, text: str) -> None:
    conn.execute(update(attachments).where(attachments.c.session_key == session_key,
                                           attachments.c.id == attachment_id)
                 .values(transcript=text))


def heard_in(conn: Connection, session_key: str) -> dict[str, str]:
    """The transcripts of the chat's attachments that have one, by id."""
    return {str(row.id): str(row.transcript) for row in conn.execute(
        select(attachments.c.id, attachments.c.transcript).where(
            attachments.c.session_key == session_key, attachments.c.transcript.is_not(None)))}


@dataclass(frozen=True)
class Usage:
    """What a chat's files take: its uploads not sent yet (how many, the oldest's time) and
    the bytes of all its files, sent and held."""

    held: int
    oldest_held: float | None
    size: int


def usage(conn: Connection, session_key: str) -> Usage:
    held = attachments.c.event_seq.is_(None)
    row = conn.execute(select(
        func.count().filter(held), func.min(attachments.c.created_at).filter(held),
        func.coalesce(func.sum(attachments.c.size), 0))
        .where(attachments.c.session_key == session_key)).one()
    return Usage(int(row[0]), row[1], int(row[2]))


def size_of_app(conn: Connection, app: str) -> int:
    """The bytes of every file in the chats the app started."""
    return int(conn.execute(
        select(func.coalesce(func.sum(attachments.c.size), 0))
        .join(sessions, sessions.c.key == attachments.c.session_key)
        .where(sessions.c.created_by_app == app)).scalar_one())


def held_before(conn: Connection, before: float, limit: int = 500) -> list[AttachmentRow]:
    """Uploads not sent that were made before `before`, oldest first (at most `limit`)."""
    return [AttachmentRow.of(row) for row in conn.execute(
        select(attachments).where(attachments.c.event_seq.is_(None),
                                  attachments.c.created_at < before)
        .order_by(attachments.c.created_at).limit(limit))]


def drop_held(conn: Connection, session_key: str, ids: list[str], before: float
              ) -> tuple[int, list[str]]:
    """Remove those of the chat's uploads `ids` still not sent and made before `before`; how
    many went, and the hashes of their bytes no row of the chat keeps any more."""
    if not ids:
        return 0, []
    going = (attachments.c.session_key == session_key) & attachments.c.id.in_(ids) \
        & attachments.c.event_seq.is_(None) & (attachments.c.created_at < before)
    hashes = {str(sha) for sha in conn.execute(select(attachments.c.sha256).where(going))
              .scalars()}
    gone = conn.execute(attachments.delete().where(going)).rowcount
    return int(gone), sorted(hashes - kept_hashes(conn, session_key, sorted(hashes)))


def kept_hashes(conn: Connection, session_key: str, hashes: list[str]) -> set[str]:
    """Of `hashes`, those some row of the chat keeps."""
    if not hashes:
        return set()
    return {str(sha) for sha in conn.execute(select(attachments.c.sha256).where(
        attachments.c.session_key == session_key, attachments.c.sha256.in_(hashes)))
        .scalars()}
