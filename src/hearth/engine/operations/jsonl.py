"""Chats as JSON Lines, to keep or to import again (`engine.operations.importing`): one chat, or
every kept chat, with each event of its variant tree, written a page at a time (never the whole file
in memory).

The format, version 1 (`VERSION`); one JSON object per line, UTF-8, each line ended by "\\n":

- line 1, the header: `{"hearth_export": 1, "chats": N, "exported_at": ISO, "hearth": version}`;
- per chat, a `{"type": "chat", ...}` line: `key` (its name here; an import gives it a new one),
  `title`, `memory_mode` (always "persistent": a restricted chat is never exported), `agent`,
  `model`, `folder`, `tags`, `pinned`, `archived`, `created_at`, `updated_at`,
  `head_event_id` (the event the conversation has reached, null before the first) and
  `events` (how many event lines follow);
- then the chat's `{"type": "run", ...}` and `{"type": "event", ...}` lines. An event line
  holds `event_id`, `parent_event_id` (the variant tree: null for a first message), `kind`,
  `content`, `meta`, `run_id`, `source_channel`, `source_thread`, `source_user`, `off_path`
  (not on the head's path: an earlier variant, what a rewind left; the importer recomputes it
  from the head) and `created_at`, in the chat's order. A run line, written before the first
  event that names it, says how that turn ended (`run_id`, `kind`, `status`, `ending`,
  `sentence`, `model`, `created_at`, `ended_at`): a turn that did not complete is no variant.
  A turn still running is written as stopped. An event whose run is not kept has a null
  `run_id`;
- then, when the chat sent files, a `{"type": "file", ...}` line for each (the chat line
  counts them in `files`): `id` (as the message's `meta.attachments` names it), `event_id`
  (the message that sent it), `name`, `content_type`, `size`, `sha256` and `data` (its bytes,
  base64): an import keeps them byte for byte, or refuses the file.

Times are ISO 8601 in UTC (null for a stored time that cannot be read: an import refuses that
line). Nothing of what the gateway holds secret is written: every string but the words of the
owner's and the assistant's messages (tool calls and their output, notices, summaries, every
`meta`, a run's sentence) passes `masking.mask`; what the owner and the model wrote is theirs
and is written as it is (as `engine.views.sendable` makes it sendable).

An event's `meta` holds only the keys of `META_KEYS`, the closed list an import takes
(`engine.operations.importing`): what shows how a message came and how a turn went. What only
the model reads (`MODEL_ONLY`: the text a saved prompt's mention sent, a notice told to the
model) is never written, so the model of an imported chat reads what its page shows; a key the
engine starts writing joins `META_KEYS` (or `MODEL_ONLY`) here.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from hearth import __version__
from hearth.engine.views import iso, sendable
from hearth.masking import mask, mask_value
from hearth.privacy.modes import mode_of, restricted
from hearth.sessions import attachments as attachment_files
from hearth.store import (
    attachments as attachment_store,
    deliveries,
    interchange,
    steers,
    transcript,
)
from hearth.store.attachments import AttachmentRow
from hearth.store.db import Database
from hearth.store.interchange import ChatSnapshot, KeptEvent
from hearth.store.runs import ACTIVE, RunRow
from hearth.store.transcript import EventRow

VERSION = 1
MEDIA_TYPE = "application/x-ndjson"
PAGE = 500  # events read at a time
OWN_WORDS = ("user", "assistant")  # kinds whose content is the owner's or the model's words
STILL_RUNNING = "This turn was still running when the chat was exported."
META_KEYS = frozenset({
    # how a message came: a channel's sender, a job, an edit, a steer, a helper's report
    "sender_name", "attachments", "guest", "job", "edit_of", steers.OFFERED_TO, steers.TAKEN,
    "helper_report",
    # how an answer went
    "finish_reason", "partial", "cut_off", "capped", "recovered", "turn_telemetry",
    "context_fed", "model_substitution", "failover",
    # what a notice or a result is about
    "ending", "outcome", "about", "word_limit", "mention", "compaction", "attempt",
    deliveries.QUIET, "delivery_id", "receipt",
})
# meta that changes what the model reads and the page does not show: never exported, and an
# import that holds it is refused (`engine.operations.importing`)
MODEL_ONLY = frozenset({"prompt", "tell_model"})


def line(value: dict[str, Any]) -> bytes:
    """One line of the file: strict JSON (no NaN, no lone surrogate), UTF-8, and a newline."""
    text = json.dumps(sendable(value), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def header(chats: int) -> bytes:
    return line({"hearth_export": VERSION, "chats": chats,
                 "exported_at": iso(datetime.now(UTC).timestamp()), "hearth": __version__})


async def one_chat(db: Database, key: str, files_dir: Path | None = None
                   ) -> tuple[bytes, list[EventRow]]:
    """The file of one chat (the caller has refused a restricted one and an unknown key), and
    its first event (what an untitled chat's file is named by). `files_dir`: where chats keep
    their files (none: the file lines are left out)."""
    lines = [part async for part in chat_lines(db, key, files_dir)]
    first = await db.reading(transcript.at, key, 1)
    return header(1 if lines else 0) + b"".join(lines), [first] if first else []


async def everything(db: Database, files_dir: Path | None = None) -> AsyncIterator[bytes]:
    """The file of every kept chat (archived ones too), oldest first, line by line. A chat
    deleted while this runs is left out, so the file then holds fewer chats than its header
    says (and an import refuses it, as a file cut short)."""
    keys = await db.reading(interchange.kept_keys)
    yield header(len(keys))
    for key in keys:
        async for chat_line in chat_lines(db, key, files_dir):
            yield chat_line


async def chat_lines(db: Database, key: str, files_dir: Path | None = None
                     ) -> AsyncIterator[bytes]:
    """The chat's lines, its own and its runs' and events', read a page at a time from one
    snapshot of its head, then its files'; nothing for a chat that is gone or keeps
    nothing."""
    chat = await db.reading(interchange.snapshot, key)
    if chat is None or restricted(mode_of(chat.memory_mode)):
        return
    sent = await db.reading(attachment_store.sent_in, key) if files_dir is not None else []
    yield line({**chat_object(chat), "files": len(sent)})
    async for event_line in _event_lines(db, key, chat.last_seq):
        yield event_line
    for row, message_id in sent:
        assert files_dir is not None
        yield await asyncio.to_thread(file_line, files_dir, row, message_id)


def file_line(files_dir: Path, row: AttachmentRow, message_id: str) -> bytes:
    """One file's line: its row and its bytes (read in a thread by the caller)."""
    data = attachment_files.path_of(files_dir, row.session_key, row.sha256).read_bytes()
    return line({"type": "file", "id": row.id, "event_id": message_id, "name": row.name,
                 "content_type": row.content_type, "size": row.size, "sha256": row.sha256,
                 "data": base64.b64encode(data).decode("ascii")})


async def _event_lines(db: Database, key: str, last_seq: int) -> AsyncIterator[bytes]:
    seen: frozenset[str] = frozenset()
    kept: set[str] = set()
    after = 0
    while True:
        events, found = await db.reading(_page, key, after, last_seq, seen)
        for run in found:
            kept.add(run.run_id)
            yield line(run_object(run))
        for event in events:
            yield line(event_object(event, kept))
        seen = seen | {e.run_id for e in events if e.run_id is not None}
        if len(events) < PAGE:
            return
        after = events[-1].seq


def _page(conn: Connection, key: str, after: int, upto: int, seen: frozenset[str]
          ) -> tuple[list[KeptEvent], list[RunRow]]:
    """A page of events and the runs they name that no earlier page named."""
    events = interchange.events_page(conn, key, after, upto, PAGE)
    named = sorted({e.run_id for e in events if e.run_id is not None} - seen)
    return events, interchange.runs_named(conn, key, named)


def chat_object(chat: ChatSnapshot) -> dict[str, Any]:
    return {"type": "chat", "key": chat.key, "title": chat.title, "memory_mode": "persistent",
            "agent": chat.agent, "model": chat.model, "folder": chat.folder,
            "tags": list(chat.tags), "pinned": chat.pinned, "archived": chat.archived,
            "created_at": iso(chat.created_at), "updated_at": iso(chat.updated_at),
            "head_event_id": chat.head_event_id, "events": chat.events}


def run_object(run: RunRow) -> dict[str, Any]:
    status, ending, sentence = run.status, run.ending, run.sentence
    if status in ACTIVE:  # a snapshot of a turn under way: imported, it never runs on
        status, ending, sentence = "stopped", "stopped", STILL_RUNNING
    return {"type": "run", "run_id": run.run_id, "kind": run.kind, "status": status,
            "ending": ending, "sentence": mask(sentence) if sentence else sentence,
            "model": run.model, "created_at": iso(run.created_at),
            "ended_at": iso(run.ended_at)}


def event_object(event: KeptEvent, kept_runs: set[str]) -> dict[str, Any]:
    content = event.content if event.kind in OWN_WORDS else mask_value(event.content)
    return {"type": "event", "event_id": event.event_id,
            "parent_event_id": event.parent_event_id, "kind": event.kind,
            "content": content, "meta": mask_value(exported_meta(event.meta)),
            "run_id": event.run_id if event.run_id in kept_runs else None,
            "source_channel": event.source_channel, "source_thread": event.source_thread,
            "source_user": event.source_user, "off_path": bool(event.off_path),
            "created_at": iso(event.created_at)}


def exported_meta(meta: object) -> object:
    """An event's meta as the file holds it: the keys of `META_KEYS` (a value that is no
    object is written as it is, and an import refuses it)."""
    if not isinstance(meta, dict):
        return meta
    return {name: value for name, value in meta.items() if name in META_KEYS}
