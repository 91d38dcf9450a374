"""Prompt mentions: `@name key=value …` at the start of a message expands a saved prompt.

Saved prompts live in `$HEARTH_HOME/prompts/`, one UTF-8 file per prompt, `<name>.md` (at most
`MAX_PROMPT_BYTES`). A name is `[a-z0-9][a-z0-9_-]{0,63}`: no dot, no slash, so a mention names
a file of that folder and nothing else; a file that resolves outside the folder (a symlink out)
is refused. The message is a mention when, after leading blanks, it starts with `@name`
followed by a blank or its end: `@ alone`, `@Bob`, `bob@example.com` or `@a/b` are not
mentions, and go as typed with nothing said.

The mention's line is read as words (split as a shell would, with "..." holding spaces; a
quote left open makes the line plain words): `key=value` words fill `{{key}}`, the others
`{{arg1}}`..`{{arg9}}` in order, and `{{arguments}}` is everything typed after the name, the
lines after the mention's included. A placeholder nothing fills becomes empty. Typed text no
placeholder took follows the prompt after a blank line: the lines after the mention's unless
the prompt holds `{{arguments}}`, and the mention line's words when no placeholder took any.

The user's event keeps what was typed (`content.text`); what was sent is its
`meta.prompt = {"name", "sent"}`, and every reader of what the model reads takes
`engine.views.sent_text`.
A name with no saved prompt is sent as typed, and a notice says so.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth.engine.delivery.events import Bus, message_frame
from hearth.engine.intake.admission import MAX_TEXT_BYTES, Admitted
from hearth.errors import Refusal
from hearth.store import transcript
from hearth.store.db import Database
from hearth.store.errors import AlreadyAppended, SessionNotFound
from hearth.store.transcript import EventRow

FOLDER = "prompts"  # in the home: $HEARTH_HOME/prompts
NAME = r"[a-z0-9][a-z0-9_-]{0,63}"
MAX_PROMPT_BYTES = 64 * 1024
MAX_LISTED = 500  # prompts a listing reads
DESCRIPTION_CHARS = 120
_NAME = re.compile(NAME)
_MENTION = re.compile(rf"@({NAME})(?=\s|$)")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_POSITIONAL = tuple(f"arg{n}" for n in range(1, 10))
_RESERVED = {"arguments", *_POSITIONAL}


@dataclass(frozen=True)
class Mention:
    """A message read as a mention: the name, and what was typed after it."""

    name: str
    line: str  # the rest of the mention's line
    body: str  # the lines after it, blank lines around them left out

    @property
    def arguments(self) -> str:
        return "\n".join(part for part in (self.line, self.body) if part)


@dataclass(frozen=True)
class SavedPrompt:
    """A prompt as the composer lists it."""

    name: str
    description: str  # its first line that is not blank
    placeholders: tuple[str, ...]  # in the order they first appear


@dataclass(frozen=True)
class Prepared:
    """A message ready for admission: its meta (with `prompt` when a mention was expanded),
    and the name of a mention no saved prompt answered."""

    meta: dict[str, Any] | None
    unknown: str | None = None


def folder_of(home: Path) -> Path:
    return home / FOLDER


def parse(text: str) -> Mention | None:
    """The mention `text` starts with, or None when it is not one."""
    stripped = text.lstrip()
    found = _MENTION.match(stripped)
    if found is None:
        return None
    line, _, body = stripped[found.end():].partition("\n")
    return Mention(found.group(1), line.strip(), _trim_blank_lines(body))


def _trim_blank_lines(text: str) -> str:
    lines = text.rstrip().split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def words(line: str) -> list[str]:
    """The line's words: split at blanks, "..." holding blanks; an open quote makes the whole
    line plain words (never an error). Backslashes and apostrophes are plain characters."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    lexer.escape = ""
    lexer.quotes = '"'
    try:
        return list(lexer)
    except ValueError:
        return line.split()


def values_of(mention: Mention) -> tuple[dict[str, str], set[str]]:
    """What each placeholder takes, and which of them the mention's line filled."""
    named: dict[str, str] = {}
    positional: list[str] = []
    for word in words(mention.line):
        pair = _PAIR.fullmatch(word)
        if pair is not None and pair.group(1) not in _RESERVED:
            named[pair.group(1)] = pair.group(2)
        else:
            positional.append(word)
    values = {**named, **dict(zip(_POSITIONAL, positional, strict=False))}
    return {**values, "arguments": mention.arguments}, set(values)


def placeholders(template: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(found.group(1) for found in _PLACEHOLDER.finditer(template)))


def expand(name: str, template: str, mention: Mention) -> str:
    """The text sent for `mention` of the saved prompt `template` (Refusal when it would be
    empty or larger than a message may be)."""
    values, from_line = values_of(mention)
    used = placeholders(template)
    need = len(template) + sum(len(values.get(found.group(1), ""))
                               for found in _PLACEHOLDER.finditer(template))
    if need > MAX_TEXT_BYTES:
        raise _too_large(name, need)
    filled = _PLACEHOLDER.sub(lambda found: values.get(found.group(1), ""), template).strip()
    rest: list[str] = []
    if "arguments" not in used:
        if mention.line and not from_line.intersection(used):
            rest.append(mention.line)
        if mention.body:
            rest.append(mention.body)
    sent = "\n\n".join(part for part in (filled, "\n".join(rest)) if part)
    if not sent.strip():
        raise Refusal("prompt_empty", 422, f"The saved prompt {name} is empty and nothing was "
                      f"typed after it; write the prompt in prompts/{name}.md.")
    if len(sent.encode("utf-8", "replace")) > MAX_TEXT_BYTES:
        raise _too_large(name, len(sent.encode("utf-8", "replace")))
    return sent


def _too_large(name: str, size: int) -> Refusal:
    return Refusal("message_too_large", 413, f"The saved prompt {name} makes a message of "
                   f"about {size:,} characters; a message may hold at most {MAX_TEXT_BYTES:,} "
                   "bytes.")


def read(folder: Path, name: str) -> str | None:
    """The saved prompt `name` (None when there is none). Refusal when its file leads out of
    the folder, is larger than MAX_PROMPT_BYTES or is not UTF-8 text. Blocking: call it on a
    thread."""
    if not _NAME.fullmatch(name):
        return None
    try:
        inside = folder.resolve(strict=True)
        real = (folder / f"{name}.md").resolve(strict=True)
    except (OSError, RuntimeError):  # not there (or a symlink loop)
        return None
    if not real.is_relative_to(inside):
        raise Refusal("prompt_outside", 422, f"The saved prompt {name} is a link to a file "
                      f"outside the prompts folder; Hearth reads prompts only from inside it.")
    if not real.is_file():
        return None
    try:
        with real.open("rb") as file:
            data = file.read(MAX_PROMPT_BYTES + 1)
    except OSError as exc:
        raise _unreadable(name) from exc
    if len(data) > MAX_PROMPT_BYTES:
        raise Refusal("prompt_too_large", 413, f"The saved prompt {name} is larger than "
                      f"{MAX_PROMPT_BYTES // 1024} KiB, the most a prompt file may hold; "
                      f"shorten prompts/{name}.md.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _unreadable(name) from exc


def _unreadable(name: str) -> Refusal:
    return Refusal("prompt_unreadable", 422, f"The saved prompt {name} could not be read as "
                   f"UTF-8 text; save prompts/{name}.md as UTF-8.")


def listing(folder: Path) -> list[SavedPrompt]:
    """The saved prompts a mention can name, by name; files that are not one (a name
    outside the rule, a link out, too large, not text) are left out. Blocking."""
    if not folder.is_dir():
        return []
    names = sorted(p.name[:-3] for p in folder.iterdir()
                   if p.name.endswith(".md") and _NAME.fullmatch(p.name[:-3]))
    out: list[SavedPrompt] = []
    for name in names[:MAX_LISTED]:
        try:
            template = read(folder, name)
        except Refusal:
            continue
        if template is not None:
            out.append(SavedPrompt(name, _description(template), placeholders(template)))
    return out


def _description(template: str) -> str:
    line = next((line.strip() for line in template.splitlines() if line.strip()), "")
    line = line.lstrip("#").strip()
    return line if len(line) <= DESCRIPTION_CHARS else line[:DESCRIPTION_CHARS - 1] + "…"


async def prepare(folder: Path, text: str, meta: dict[str, Any] | None) -> Prepared:
    """The message's meta with what its mention sends (`meta.prompt`), read off the loop;
    the meta as it was when the message is no mention or names no saved prompt."""
    mention = parse(text) if isinstance(text, str) else None
    if mention is None:
        return Prepared(meta)
    template = await asyncio.to_thread(read, folder, mention.name)
    if template is None:
        return Prepared(meta, unknown=mention.name)
    sent = expand(mention.name, template, mention)
    return Prepared({**(meta or {}), "prompt": {"name": mention.name, "sent": sent}})


def unknown_sentence(name: str) -> str:
    return f"No saved prompt named {name}; sent as typed."


async def tell(db: Database, bus: Bus, admitted: Admitted, prepared: Prepared) -> None:
    """Say, right after the message, that its mention named no saved prompt (once)."""
    if prepared.unknown is None or admitted.duplicate:
        return
    try:
        event = await db.writing(
            transcript.append, admitted.session_key, "notice",
            {"text": unknown_sentence(prepared.unknown)}, meta={"mention": prepared.unknown},
            run_id=admitted.run_id, idempotency_key=f"mention:{admitted.run_id}",
            durable=False)
    except (AlreadyAppended, SessionNotFound):
        return
    bus.publish(admitted.session_key, message_frame(event))


def sent_markdown(event: EventRow) -> list[str]:
    """For an export in Markdown: what a mention sent, quoted under what was typed (nothing
    for any other event)."""
    meta = event.meta if isinstance(event.meta, dict) else {}
    prompt = meta.get("prompt") if event.kind == "user" else None
    if not isinstance(prompt, dict) or not isinstance(prompt.get("sent"), str):
        return []
    quoted = [f"> {line}".rstrip() for line in str(prompt["sent"]).strip().splitlines()]
    return [f"*Sent as the saved prompt {prompt.get('name')}:*", "", *quoted, ""]
