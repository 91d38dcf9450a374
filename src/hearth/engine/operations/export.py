"""A chat as a download: every message of it in order, as JSON (the chat's view and each
message's, the shapes the API answers) or as Markdown to read (a heading, the date, a section
per message of the owner and of the assistant, a line per tool call, notices in italics).

A chat that keeps nothing (Incognito, Temporary, or one whose mode cannot be read) is never
exported (409 `export_refused`): its text is never written anywhere that could outlast it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hearth.engine.intake.mentions import sent_markdown
from hearth.engine.operations import jsonl
from hearth.engine.turn.approval.gate import target_of
from hearth.engine.views import (
    UNREADABLE,
    as_object,
    event_text,
    iso,
    message_view,
    moment,
    readable_content,
    sendable_text,
    session_view,
)
from hearth.errors import Refusal
from hearth.privacy.modes import mode_of, restricted
from hearth.privacy.reach import why
from hearth.sessions import chats
from hearth.store import branches, transcript
from hearth.store.db import Database
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow

FORMATS = {"json": ("application/json", "json"),
           "markdown": ("text/markdown; charset=utf-8", "md"),
           "jsonl": (jsonl.MEDIA_TYPE, "jsonl")}  # the whole tree, to import (engine.jsonl)
PAGE = 1000  # events read at a time
NAME_CHARS = 80  # of a file name, before its extension
SUMMARY_CHARS = 160  # of a tool call's target or arguments, on its line
OPENING_WORDS = 8  # an untitled chat is headed by the first words of its first message
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ExportRefused(Refusal):
    """A chat that cannot be exported (its mode keeps nothing)."""


@dataclass(frozen=True)
class Export:
    filename: str  # safe to put in a header as it is: letters, digits, '.', '_', '-'
    media_type: str
    body: bytes


async def export_chat(db: Database, key: str, fmt: str = "json",
                      files_dir: Path | None = None) -> Export:
    """The chat called `key` in `fmt` (`json`, `markdown` or `jsonl`): 404 for no such chat, 409
    `export_refused` for a chat that keeps nothing, 422 for a format there is not."""
    if fmt not in FORMATS:
        raise Refusal("invalid_format", 422,
                      f"An export is one of {', '.join(FORMATS)}; {fmt[:40]!r} is not one.")
    session = await chats.get_chat(db, key)
    _refuse_restricted(session)
    media_type, extension = FORMATS[fmt]
    if fmt == "jsonl":
        body, opening = await jsonl.one_chat(db, key, files_dir)
        return Export(f"{file_name(session, opening)}.{extension}", media_type, body)
    events = await _every_event(db, key)
    text = (_as_json(session, events, await db.reading(branches.variants, key, events))
            if fmt == "json" else as_markdown(session, events, datetime.now(UTC)))
    return Export(f"{file_name(session, events)}.{extension}", media_type,
                  sendable_text(text).encode("utf-8"))


def _refuse_restricted(session: SessionRow) -> None:
    mode = mode_of(session.memory_mode)
    if restricted(mode):
        raise ExportRefused(
            "export_refused", 409,
            f"{why(mode)}, and nothing of it may outlast it, so it is not exported: an export "
            "would keep its text in a file. Only an ordinary chat can be exported.")


async def _every_event(db: Database, key: str) -> list[EventRow]:
    """Every event of the chat, oldest first, read a page at a time (so a long chat holds a
    reader no longer than one page's read)."""
    events: list[EventRow] = []
    after = 0
    while True:
        page = await db.reading(transcript.after, key, after, PAGE)
        events += page
        if len(page) < PAGE:
            return events
        after = page[-1].seq


def _as_json(session: SessionRow, events: list[EventRow],
             variants: dict[str, branches.Variants]) -> str:
    """The chat and its messages, each as `GET /api/sessions/{key}` serves it."""
    shown = [e for e in events if e.kind in branches.VISIBLE]
    indexes = {e.event_id: i for i, e in enumerate(shown)}
    return json.dumps({"session": session_view(session),
                       "messages": [message_view(e, visible_index=indexes.get(e.event_id),
                                                 variants=variants.get(e.event_id))
                                    for e in events],
                       "exported_at": iso(datetime.now(UTC).timestamp())},
                      ensure_ascii=False, allow_nan=False, indent=2)


def heading_of(session: SessionRow, events: list[EventRow]) -> str:
    """The chat's title, else the first words of its first message, else its key."""
    if session.title and session.title.strip():
        return session.title.strip()
    first = next((e for e in events if e.kind == "user" and readable_content(e)), None)
    words = event_text(first).split() if first is not None else []
    if not words:
        return session.key
    opening = " ".join(words[:OPENING_WORDS])
    return opening + ("…" if len(words) > OPENING_WORDS else "")


def file_name(session: SessionRow, events: list[EventRow]) -> str:
    """A file name from the chat's heading: letters, digits, '.', '_' and '-' only."""
    name = _UNSAFE.sub("-", heading_of(session, events)).strip("-.")[:NAME_CHARS].strip("-.")
    return name or _UNSAFE.sub("-", session.key).strip("-.") or "chat"


def as_markdown(session: SessionRow, events: list[EventRow], exported: datetime) -> str:
    lines = [f"# {_one_line(heading_of(session, events))}", "",
             f"*Chat {_escaped(session.key)}, started {_when(session.created_at, ' UTC')}; "
             f"exported {exported:%Y-%m-%d %H:%M} UTC.*", ""]
    for event in events:
        lines += _markdown_of(event)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_of(event: EventRow) -> list[str]:
    if event.kind in ("user", "assistant"):
        who = "You" if event.kind == "user" else "Assistant"
        text = event_text(event).strip()
        return [f"## {who} ({_when(event.created_at)})", "", text, "", *sent_markdown(event)]
    if event.kind == "tool_call":
        content = as_object(event.content)
        name = content.get("name") if readable_content(event) else UNREADABLE
        return [f"- Tool call: {code(str(name))} {code(call_summary(content))}", ""]
    if event.kind == "notice":
        return [f"*{_escaped(_one_line(event_text(event)))}*", ""]
    return []  # a tool's output and a summary are the model's reading, not the conversation


def _when(stamp: object, zone: str = "") -> str:
    """A stored time as the Markdown shows it, in UTC ("unreadable" for one that is none)."""
    found = moment(stamp)
    return UNREADABLE if found is None else f"{found:%Y-%m-%d %H:%M}{zone}"


def call_summary(content: dict[str, Any]) -> str:
    """A tool call's target (path, command or URL), else its arguments, on one short line."""
    arguments = content.get("arguments")
    target = target_of(arguments) if isinstance(arguments, dict) else None
    if target is None:
        target = json.dumps(arguments, ensure_ascii=False, default=str)
    line = _one_line(target)
    return line if len(line) <= SUMMARY_CHARS else line[:SUMMARY_CHARS] + "…"


def code(text: str) -> str:
    """`text` as an inline code span, fenced by more backticks than any run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _escaped(text: str) -> str:
    """Text that stays plain inside emphasis: Markdown's punctuation escaped."""
    return re.sub(r"([\\`*_\[\]<>#|~])", r"\\\1", text)
