"""Chats imported from a JSON Lines export (`engine.operations.jsonl`, whose docstring says the
format): the whole file read and checked first, then each chat written in one writer transaction, as
a new chat.

Checked before anything is written: line 1 is the header of a version this gateway reads,
every other line is a JSON object of a known type (chat, run, event) after a chat line; each
chat is persistent (a restricted chat is never imported) with a title, folder and tags the
dashboard would take; each time is one from 2000-01-01 to a day from now; each event has a
kind Hearth knows and content of that kind's shape, meta holding only the keys an export
writes (`engine.operations.jsonl.META_KEYS`) and nothing that would have the model read what the
page does not show (`jsonl.MODEL_ONLY`: a mention's sent text, a notice told to the model), an
id no other event of its chat has, and a parent that is an earlier event of the same chat (or
none): the variant tree chains; the chat's head is one of its events, its run ids are declared
by its run lines, it holds as many events as its chat line says, and the file as many chats as
its header says. Each file a message sent is in the file (a `file` line of its chat for each
file its `meta.attachments` names) and opens: its bytes are checked as an upload's are
(`sessions.attachments.Receiving`: its type sniffed from its bytes, never taken from the
line; an image must decode as what its bytes say), staged in a folder of the import's own
beside the chats' folders. A file that fails any check is refused whole (422
`import_invalid`, naming the line and what is wrong, and a file by its name, never quoting a
message) and nothing of it is written: no chat, no row, no byte on disk.

Written, all the file's chats in one writer transaction (so an import is kept whole or not at
all): each chat gets a new key (named by `sessions.naming`, as any new chat), new event and
run ids (the tree kept: each parent mapped to its new id), so an import never overwrites a kept
chat and importing a file twice makes two new chats. Which events are off the head's path is
recomputed from the head (the file's `off_path` is not read). A run is written as it ended,
never as running or waiting (recovery never picks one up): it is the record of how that turn
ended, which the variants read. The chat is persistent, asks before a change (trust is never
imported) and works in the default workspace; a model or an agent not set up here gives way to
the chat chain or the default agent, and the answer says so. A notice is kept masked, as
`store.transcript` keeps one. Its files are put in its folder from the staging folder inside
that transaction (`sessions.attachment_links.share`), each named on its message's meta by
its new id with the type, size and hash its bytes have; a transaction that fails takes the
folders it made with it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import math
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from sqlalchemy import Connection

from hearth.engine.operations import jsonl
from hearth.engine.views import attachment_ref, sent_files
from hearth.errors import Refusal
from hearth.masking import mask_value
from hearth.sessions import attachment_links, attachments as attachment_files, chats
from hearth.sessions.attachments import AttachmentRefused, Kept, clean_name
from hearth.sessions.chats import Choices
from hearth.sessions.folders import chat_folder
from hearth.store import attachments as attachment_store, audit, interchange
from hearth.store.attachments import AttachmentRow
from hearth.store.db import Database, now
from hearth.store.runs import FINAL, new_run_id
from hearth.store.transcript import KINDS

VERSION = 1  # the format version this gateway reads (engine.jsonl.VERSION)
ORIGIN = "import"
ID_MAX = 64  # characters of an event or run id
SOURCE_MAX = {"source_channel": 100, "source_thread": 200, "source_user": 200}
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC).timestamp()  # no Hearth chat is older
AHEAD = 24 * 3600  # seconds past now a time may be (a clock a little ahead, a zone's offset)
TEXT_KINDS = ("user", "assistant", "notice", "summary")  # content {"text": ...}
CALL_KINDS = ("tool_call", "tool_result")  # content {"call_id": ..., ...}
MAX_DEPTH = 100  # of a content or meta value
SHOWN = 40  # characters of a value a sentence quotes
BOM = b"\xef\xbb\xbf"  # a byte order mark an editor may have put before the header
STAGING = ".importing-"  # an import's own folder beside the chats' folders, while it runs


class ImportInvalid(Refusal):
    """A file that cannot be imported: the line and what is wrong with it."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__("import_invalid", 422,
                         f"Line {line}: {problem} Nothing was imported.", {"line": line})


class _Bad(Exception):
    """What is wrong with the line being read (the sentence, without the line's number)."""


@dataclass(frozen=True)
class RunIn:
    line: int
    run_id: str
    kind: str
    status: str
    ending: str | None
    sentence: str | None
    model: str | None
    created_at: float
    ended_at: float | None


@dataclass(frozen=True)
class EventIn:
    line: int
    event_id: str
    parent_event_id: str | None
    kind: str
    content: dict[str, Any]
    meta: dict[str, Any]
    run_id: str | None
    sources: dict[str, str | None]
    created_at: float


@dataclass(frozen=True)
class FileIn:
    """A file a message of the chat sent, its bytes checked against its size and hash (its
    type is what its bytes are, once staged: `Kept`)."""

    line: int
    file_id: str  # as the message's meta.attachments names it in the file
    event_id: str
    name: str
    sha256: str
    data: bytes


@dataclass
class ChatIn:
    line: int
    key: str | None
    title: str | None
    agent: str | None
    model: str | None
    filing: dict[str, Any]  # folder, tags, pinned, archived
    created_at: float
    head: str | None
    declared: int | None  # the events its chat line says follow
    declared_files: int = 0  # the file lines it says follow them
    runs: dict[str, RunIn] = field(default_factory=dict)
    files: list[FileIn] = field(default_factory=list)
    events: list[EventIn] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Imported:
    key: str
    source: str | None  # the chat's key in the file
    title: str | None
    events: int
    notes: tuple[str, ...]

    def view(self) -> dict[str, Any]:
        return {"key": self.key, "from": self.source, "title": self.title,
                "events": self.events, "notes": list(self.notes)}


@dataclass(frozen=True)
class ImportResult:
    checked: int  # chats in the file
    imported: list[Imported]  # empty for a check alone

    def view(self) -> dict[str, Any]:
        return {"chats": self.checked, "imported": [i.view() for i in self.imported]}


async def import_file(db: Database, choices: Choices, body: bytes, *, line_offset: int = 0,
                      dry_run: bool = False, files_dir: Path | None = None) -> ImportResult:
    """Check the whole file, then (unless `dry_run`) write each chat as a new chat. A part of
    a longer file says where its second line stands in that file by `line_offset` (its line
    k > 1 is the file's line k + line_offset), so a refusal names the file's line."""
    parsed = await asyncio.to_thread(parse, body, line_offset)
    staging = await asyncio.to_thread(_staging, files_dir)
    try:
        kept = await asyncio.to_thread(staged_files, parsed, staging)
        if dry_run:
            return ImportResult(len(parsed), [])
        plans = [(chat, *_runs_on(chat, choices)) for chat in parsed]
        made_folders: list[Path] = []
        try:
            imported = await db.writing(_write_all, plans, kept, staging, files_dir,
                                        made_folders)
        except BaseException:
            await asyncio.to_thread(_remove, made_folders)
            raise
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, True)
    return ImportResult(len(parsed), imported)


def _staging(files_dir: Path | None) -> Path:
    """A new folder of this import's own, beside the chats' folders (the same disk, so a
    file is put in place by a link); in the system's temporary folder when none is given."""
    if files_dir is None:
        return Path(tempfile.mkdtemp(prefix="hearth" + STAGING))
    files_dir.mkdir(parents=True, exist_ok=True)
    staging = files_dir / f"{STAGING}{uuid.uuid4().hex}"
    staging.mkdir(mode=0o700)
    return staging


def _remove(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def staged_files(parsed: list[ChatIn], staging: Path) -> dict[int, Kept]:
    """Each file of the import (by its line) kept in `staging` as an upload is kept: its type
    sniffed from its bytes, an image decoded (ImportInvalid for the first that does not
    open, naming it). Blocking: run in a thread."""
    kept: dict[int, Kept] = {}
    for chat in parsed:
        for file in chat.files:
            receiving = attachment_files.Receiving(staging, len(file.data) + 1)
            try:
                receiving.add(file.data)
                kept[file.line] = receiving.keep()
            except AttachmentRefused as refused:
                receiving.discard()
                why = refused.sentence.split("; nothing")[0].rstrip(".")
                raise ImportInvalid(file.line, f"the file {_shown(file.name)} does not open "
                                               f"({why}).") from None
    return kept


# ------------------------------------------------------------------ reading the file


def parse(body: bytes, line_offset: int = 0) -> list[ChatIn]:
    """Every chat of the file, checked (ImportInvalid for the first line that fails)."""
    found: list[ChatIn] = []
    declared: int | None = None
    for index, raw in enumerate(body.split(b"\n"), start=1):
        number = 1 if index == 1 else index + line_offset
        if not raw.strip() and index > 1:
            continue  # a blank line (the file's last newline ends the last line)
        try:
            value = _object_of(raw.removeprefix(BOM) if index == 1 else raw)
            if index == 1:
                declared = _header(value)
            else:
                _take(value, number, found)
        except _Bad as bad:
            raise ImportInvalid(number, str(bad)) from None
    if found:
        _close(found[-1])
    if declared is not None and len(found) != declared:
        raise ImportInvalid(1, f"the header says the file holds {declared} chats, and it holds "
                               f"{len(found)}: the file was cut short, or a chat was deleted "
                               "while it was exported.")
    return found


def _object_of(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad("it is not UTF-8 text.") from None
    if not text.strip():
        raise _Bad("it is empty; a Hearth export begins with its header line, "
                   '{"hearth_export": 1, "chats": N}.')
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise _Bad(f"it is not valid JSON ({error.msg} at column {error.colno}).") from None
    except (ValueError, RecursionError):
        raise _Bad("it is not valid JSON (a number JSON has not, or nesting too deep).") from None
    if not isinstance(value, dict):
        raise _Bad("it is not a JSON object; each line of an export is one.")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _header(value: dict[str, Any]) -> int:
    """The number of chats the header says the file holds."""
    version = value.get("hearth_export")
    if not _is_int(version):
        raise _Bad('this is not a Hearth export: its first line is the header, '
                   '{"hearth_export": 1, "chats": N}.')
    if version != VERSION:
        raise _Bad(f"this is a Hearth export of version {_shown(version)}; this gateway reads "
                   f"version {VERSION}.")
    count = value.get("chats")
    if not _is_int(count) or count < 0:
        raise _Bad("the header's chats must be the number of chats in the file.")
    return count


def _take(value: dict[str, Any], number: int, found: list[ChatIn]) -> None:
    kind = value.get("type")
    if kind == "chat":
        if found:
            _close(found[-1])
        found.append(_chat(value, number))
    elif kind in ("run", "event", "file"):
        if not found:
            raise _Bad(f"a {kind} line comes before any chat line; it belongs to the chat "
                       "line above it.")
        {"run": _run, "event": _event, "file": _file}[str(kind)](value, number, found[-1])
    else:
        raise _Bad(f"its type is {_shown(kind)}; a line after the header is a chat, a run, "
                   "an event or a file.")


def _chat(value: dict[str, Any], number: int) -> ChatIn:
    if value.get("memory_mode", "persistent") != "persistent":
        raise _Bad("this chat is not persistent; a chat that keeps nothing (Incognito, "
                   "Temporary) is never exported, and never imported.")
    try:
        title = value.get("title")
        filing = chats.checked_filing({"folder": value.get("folder"),
                                       "tags": value.get("tags", []),
                                       "pinned": value.get("pinned", False)})
        title = None if title is None else chats.checked_text(
            title, "title", "invalid_title", chats.TITLE_MAX)
    except Refusal as refused:
        raise _Bad(f"the chat's title or filing cannot be used here: {refused.sentence}") from None
    declared = value.get("events")
    if declared is not None and (not _is_int(declared) or declared < 0):
        raise _Bad("the chat's events must be the number of event lines that follow it.")
    files = value.get("files", 0)
    if not _is_int(files) or files < 0:
        raise _Bad("the chat's files must be the number of file lines that follow its events.")
    return ChatIn(number, _text(value, "key", 200), title, _text(value, "agent", 100),
                  _text(value, "model", 200),
                  {**filing, "archived": _flag(value, "archived")},
                  _time(value, "created_at"), _text(value, "head_event_id", ID_MAX),
                  declared, files)


def _run(value: dict[str, Any], number: int, chat: ChatIn) -> None:
    run_id = _id(value, "run_id")
    if run_id in chat.runs:
        raise _Bad(f"run {_shown(run_id)} has a line already in this chat.")
    status = value.get("status")
    if status not in FINAL:
        raise _Bad(f"a run's status is one of {', '.join(FINAL)} (a turn still running is "
                   "exported as stopped).")
    ended = value.get("ended_at")
    chat.runs[run_id] = RunIn(
        number, run_id, _text(value, "kind", 20) or "chat", str(status),
        _text(value, "ending", 50), _text(value, "sentence", None), _text(value, "model", 200),
        _time(value, "created_at"), None if ended is None else _time(value, "ended_at"))


def _event(value: dict[str, Any], number: int, chat: ChatIn) -> None:
    event_id = _id(value, "event_id")
    if event_id in chat.ids:
        raise _Bad(f"event {_shown(event_id)} has a line already in this chat; an event's "
                   "id is its own.")
    parent = _text(value, "parent_event_id", ID_MAX)
    if parent is not None and parent not in chat.ids:
        raise _Bad(f"its parent_event_id {_shown(parent)} is no earlier event of this chat: "
                   "each event's parent comes before it in the same chat (or is null).")
    kind = value.get("kind")
    if kind not in KINDS:
        raise _Bad(f"its kind is {_shown(kind)}; an event is one of {', '.join(KINDS)}.")
    content = _shaped(str(kind), value.get("content"))
    meta = _meta(value.get("meta", {}))
    sources = {name: _text(value, name, limit) for name, limit in SOURCE_MAX.items()}
    chat.events.append(EventIn(number, event_id, parent, str(kind), content, meta,
                               _text(value, "run_id", ID_MAX), sources,
                               _time(value, "created_at")))
    chat.ids.add(event_id)


def _file(value: dict[str, Any], number: int, chat: ChatIn) -> None:
    """A file a message of the chat sent: its message an event line above, its bytes the
    size and SHA-256 the line says."""
    file_id = _id(value, "id")
    if any(f.file_id == file_id for f in chat.files):
        raise _Bad(f"file {_shown(file_id)} has a line already in this chat.")
    event_id = _id(value, "event_id")
    if event_id not in chat.ids:
        raise _Bad(f"its event_id {_shown(event_id)} is no event of this chat above it.")
    sha256 = _text(value, "sha256", 64) or ""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise _Bad("its sha256 must be the 64 hex digits of the file's SHA-256.")
    try:
        data = base64.b64decode(str(value.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        raise _Bad("its data is not valid base64.") from None
    if len(data) != value.get("size") or hashlib.sha256(data).hexdigest() != sha256:
        raise _Bad("its data is not the file its size and sha256 say: the file was changed "
                   "or cut.")
    chat.files.append(FileIn(number, file_id, event_id, clean_name(_text(value, "name", 1000)),
                             sha256, data))


def _shaped(kind: str, content: object) -> dict[str, Any]:
    """The event's content, if it has its kind's shape."""
    if not isinstance(content, dict) or _depth(content) > MAX_DEPTH:
        raise _Bad("its content is not a JSON object (or nests too deep).")
    if kind in TEXT_KINDS and not isinstance(content.get("text"), str):
        raise _Bad(f"a {kind} event's content holds its text: {{\"text\": \"...\"}}.")
    if kind in CALL_KINDS and not isinstance(content.get("call_id"), str):
        raise _Bad(f"a {kind} event's content names its call_id.")
    if kind == "tool_call" and not isinstance(content.get("name"), str):
        raise _Bad("a tool_call event's content names its tool (name).")
    if kind == "tool_result" and not isinstance(content.get("output"), str):
        raise _Bad("a tool_result event's content holds its output as text.")
    if kind == "tool_call" and not isinstance(content.get("arguments", {}), dict):
        raise _Bad("a tool_call event's arguments are a JSON object.")
    return content


def _meta(meta: object) -> dict[str, Any]:
    """The event's meta, if it is data the page shows: only keys an export writes, and none
    that changes what the model reads."""
    if not isinstance(meta, dict) or _depth(meta) > MAX_DEPTH:
        raise _Bad("its meta is not a JSON object (or nests too deep).")
    model_only = sorted(jsonl.MODEL_ONLY & meta.keys())
    if model_only:
        raise _Bad(f"its meta.{model_only[0]} would have the model read what the chat's page "
                   "does not show (what a saved prompt's mention sent, or a notice told to the "
                   "model); an import is what the page shows, and an export never writes it.")
    unknown = sorted(meta.keys() - jsonl.META_KEYS)
    if unknown:
        raise _Bad(f"its meta holds {_shown(unknown[0])}, a key no Hearth export writes, so "
                   "no import takes it.")
    return meta


def _close(chat: ChatIn) -> None:
    """The checks a chat passes once all its lines are read."""
    if chat.declared is not None and chat.declared != len(chat.events):
        raise ImportInvalid(chat.line, f"the chat says {chat.declared} events follow it, and "
                                       f"{len(chat.events)} do: the file was cut short.")
    if chat.declared_files != len(chat.files):
        raise ImportInvalid(chat.line, f"the chat says {chat.declared_files} files follow its "
                                       f"events, and {len(chat.files)} do: the file was cut "
                                       "short.")
    if chat.head is not None and chat.head not in chat.ids:
        raise ImportInvalid(chat.line, "the chat's head_event_id names no event of this chat.")
    for event in chat.events:
        if event.run_id is not None and event.run_id not in chat.runs:
            raise ImportInvalid(event.line, f"its run_id {_shown(event.run_id)} names no run "
                                            "line of this chat.")
        _files_there(chat, event)


def _files_there(chat: ChatIn, event: EventIn) -> None:
    """Each file the event's message sent (`meta.attachments`) has its file line in the chat,
    sent with that message (a channel's bare name of a file it did not fetch is no file)."""
    sent = {f.file_id: f for f in chat.files if f.event_id == event.event_id}
    for named in sent_files(event.meta):
        if str(named.get("id")) not in sent:
            raise ImportInvalid(event.line, f"its message sent the file "
                                            f"{_shown(str(named.get('name', 'file')))}, and "
                                            "the file holds no file line of it: it was left "
                                            "out or cut. Export the chat again.")


# ------------------------------------------------------------------ values


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def _text(value: dict[str, Any], name: str, limit: int | None) -> str | None:
    """An optional text field of at most `limit` characters."""
    raw = value.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str) or (limit is not None and not 0 < len(raw) <= limit):
        bound = f" of 1 to {limit} characters" if limit is not None else ""
        raise _Bad(f"its {name} must be text{bound}, or null.")
    return raw


def _id(value: dict[str, Any], name: str) -> str:
    found = _text(value, name, ID_MAX)
    if found is None:
        raise _Bad(f"it has no {name}.")
    return found


def _flag(value: dict[str, Any], name: str) -> bool:
    raw = value.get(name, False)
    if not isinstance(raw, bool):
        raise _Bad(f"its {name} must be true or false.")
    return raw


def _time(value: dict[str, Any], name: str) -> float:
    """A time: ISO 8601 (UTC when it names no zone), or UNIX seconds."""
    raw = value.get(name)
    try:
        if isinstance(raw, str):
            moment = datetime.fromisoformat(raw)
            stamp = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
        elif _is_int(raw) or isinstance(raw, float):
            stamp = float(raw)
        else:
            raise ValueError(name)
    except (ValueError, OverflowError, OSError):
        raise _Bad(f"its {name} must be a time (ISO 8601).") from None
    if not math.isfinite(stamp):
        raise _Bad(f"its {name} must be a time (ISO 8601).")
    if not EARLIEST <= stamp <= time.time() + AHEAD:
        raise _Bad(f"its {name} is {_shown(raw)}: a time is from 2000-01-01 to a day from "
                   "now.")
    return stamp


def _depth(value: object) -> int:
    """How deep a JSON value nests (1 for a flat object), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
    return deepest


# ------------------------------------------------------------------ writing


def _runs_on(chat: ChatIn, choices: Choices) -> tuple[str, str | None, tuple[str, ...]]:
    """The chat's agent and model here (what is not set up gives way), and notes saying so."""
    notes = []
    agent = chat.agent or chats.DEFAULT_AGENT
    if agent not in choices.agents:
        notes.append(f"Its agent {_shown(agent)} is not set up here: it has the default agent.")
        agent = chats.DEFAULT_AGENT
    model = chat.model
    if model is not None and model not in choices.models:
        notes.append(f"Its model {_shown(model)} is not set up here: it runs on the chat chain.")
        model = None
    return agent, model, tuple(notes)


Plan = tuple[ChatIn, str, str | None, tuple[str, ...]]  # a chat, its agent, model and notes


def _write_all(conn: Connection, plans: list[Plan], kept: dict[int, Kept], staging: Path,
               files_dir: Path | None, made_folders: list[Path]) -> list[Imported]:
    """Every chat of the import as a new chat, in one transaction (the writer's thread): its
    rows, and its files put in its folder from `staging` (the folders made are added to
    `made_folders`, for the caller to remove should the transaction fail)."""
    imported = []
    for chat, agent, model, notes in plans:
        made, rows = _write_chat(conn, chat, agent, model, notes, kept)
        if rows and files_dir is not None:
            _place_files(files_dir, made.key, rows, staging, made_folders)
        imported.append(made)
    return imported


def _place_files(files_dir: Path, key: str, rows: list[AttachmentRow], staging: Path,
                 made_folders: list[Path]) -> None:
    """The chat's files, linked into its folder from where the import staged them."""
    folder = chat_folder(files_dir, key)
    if not folder.exists():
        made_folders.append(folder)
    for row in rows:
        attachment_links.share(staging / row.sha256, attachment_files.folder_of(files_dir, key))


def _write_chat(conn: Connection, chat: ChatIn, agent: str, model: str | None,
                notes: tuple[str, ...], kept: dict[int, Kept]
                ) -> tuple[Imported, list[AttachmentRow]]:
    """The chat as a new chat, in the caller's (one) transaction; its files' rows."""
    made = chats.insert_new(conn, chats.checked_new(memory_mode="persistent", agent=agent,
                                                    model=model, origin=ORIGIN))
    ids = {e.event_id: uuid.uuid4().hex for e in chat.events}
    runs = {run_id: new_run_id() for run_id in chat.runs}
    seqs = {e.event_id: seq for seq, e in enumerate(chat.events, start=1)}
    files = [_file_row(made.key, seqs[f.event_id], f, kept[f.line]) for f in chat.files]
    refs = {f.file_id: attachment_ref(row) for f, row in zip(chat.files, files, strict=True)}
    on_path = _path(chat)
    events = [_event_row(made.key, seq, e, ids, runs, e.event_id not in on_path, refs)
              for seq, e in enumerate(chat.events, start=1)]
    first_asks: dict[str, int] = {}
    for row in events:
        if row["kind"] == "user" and row["run_id"] is not None:
            first_asks.setdefault(row["run_id"], row["seq"])
    interchange.insert_runs(conn, [_run_row(made.key, made.tab_id, made.generation, run,
                                            runs[run.run_id], first_asks)
                                   for run in chat.runs.values()])
    interchange.insert_events(conn, events)
    for sent in files:
        attachment_store.insert(conn, sent.id, made.key, sent.event_seq or 0, sent.sha256,
                                sent.name, sent.content_type, sent.size)
    interchange.set_imported(
        conn, made.key, title=chat.title, **chat.filing, created_at=chat.created_at,
        updated_at=now(), head_event_id=ids.get(chat.head or ""), last_seq=len(events),
        message_count=len(on_path))
    audit.write(conn, "chat.import", actor="owner", session_key=made.key,
                detail={"from": chat.key, "events": len(events)})
    return Imported(made.key, chat.key, chat.title, len(events), notes), files


def _file_row(key: str, seq: int, file: FileIn, kept: Kept) -> AttachmentRow:
    """A file's row: a new id, and the hash, size and type of the bytes staged."""
    return AttachmentRow(id=attachment_store.new_id(), session_key=key, event_seq=seq,
                         sha256=kept.sha256, name=file.name, content_type=kept.content_type,
                         size=kept.size, created_at=now())


def _path(chat: ChatIn) -> set[str]:
    """The ids (the file's) of the events on the path from the first message to the head."""
    parents = {e.event_id: e.parent_event_id for e in chat.events}
    path: set[str] = set()
    at = chat.head
    while at is not None and at not in path:
        path.add(at)
        at = parents.get(at)
    return path


def _event_row(key: str, seq: int, event: EventIn, ids: dict[str, str], runs: dict[str, str],
               off_path: bool, refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    content = mask_value(event.content) if event.kind == "notice" else event.content
    return {"session_key": key, "seq": seq, "event_id": ids[event.event_id],
            "parent_event_id": ids.get(event.parent_event_id or ""),
            "idempotency_key": None, "kind": event.kind, "content": content,
            "meta": _files_named(event.meta, refs),
            "run_id": runs.get(event.run_id or ""), **event.sources,
            "created_at": event.created_at, "off_path": off_path}


def _files_named(meta: dict[str, Any], refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A message's meta with the files it sent named as their rows are: the new id, and the
    type, size and hash of their bytes (never what the file's lines said; `_close` has
    refused a file the import does not carry)."""
    named = meta.get("attachments")
    if not isinstance(named, list) or not any(isinstance(f, dict) for f in named):
        return meta
    renamed = [{**f, **refs[str(f.get("id"))]} if isinstance(f, dict) else f for f in named]
    return {**meta, "attachments": renamed}


def _run_row(key: str, tab_id: str, generation: int, run: RunIn, run_id: str,
             first_asks: dict[str, int]) -> dict[str, Any]:
    return {"run_id": run_id, "session_key": key, "tab_id": tab_id, "generation": generation,
            "kind": run.kind, "status": run.status, "ending": run.ending,
            "sentence": mask_value(run.sentence), "recovery_attempts": 0, "model": run.model,
            "user_event_seq": first_asks.get(run_id), "created_at": run.created_at,
            "started_at": run.created_at, "ended_at": run.ended_at or run.created_at,
            "partial_text": None, "ended_seq": None}
