"""Chats as the surfaces see them: open or create, list, read a window, rename, file.

A new chat is named by `naming`; a kept chat's name opens that chat, and asking it for another
memory mode is refused (its mode is fixed when it is made). Incognito and Temporary chats are
never listed, so they are never filed either: a folder, tags or a pin is refused for them.
A listed chat may be in one folder, carry up to 20 tags (lower-cased) and be pinned; the list
shows pinned chats first, and filters by folder and by tag. A title, a folder name and a tag
are all checked by one rule (`checked_text`): trimmed, not empty, not too long, and no control
or text-direction characters (a NUL or a right-to-left override could disguise a chat).

What a chat runs on (its model, null for the chat chain, and its agent) is one of the
`Choices` of the settings snapshot the next turn runs from, checked when the chat is made and
whenever it is changed; a turn reads them when it starts, so a change applies to the next turn.
Archived chats leave the list (`list_chats(archived=True)` lists only them); like filing,
archiving is refused for a chat that is never listed. Trust, model and agent may be changed
on any chat, Incognito and Temporary ones included: they are the owner's settings for the
chat's next turn, and that turn's model is the one its work may reach.
"""

from __future__ import annotations

import base64
import json
import math
import os
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from hearth.errors import Refusal
from hearth.privacy.modes import mode_of, restricted
from hearth.privacy.reach import RestrictedSession, why
from hearth.sessions.naming import (
    NAME_PATTERN,
    chat_number_of,
    key_for,
    name_part,
    next_chat_name,
)
from hearth.store import branches, runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.sessions import Position, SessionRow
from hearth.store.transcript import EventRow

MEMORY_MODES = ("persistent", "incognito", "temporary")
TRUST = ("ask", "trusted")  # trusted: calls that may change something run without asking
LISTED_MODES = ("persistent",)
MODE_TITLES = {"incognito": "Incognito chat", "temporary": "Temporary chat"}
LABEL_MAX = 60  # characters in a folder name or a tag
TITLE_MAX = 200  # characters in a chat's title
MAX_TAGS = 20  # tags on one chat
FILING = ("folder", "tags", "pinned")
CHOICES = ("model", "agent")  # what a chat runs on; null goes back to the default
DEFAULT_AGENT = "default"  # the agent a chat has unless it names another (config.agent)
_LINE_CONTROLS = ("Cc", "Cs", "Zl", "Zp")  # control characters, stray surrogates, line breaks
_DIRECTION_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                "\u2066\u2067\u2068\u2069")


class ChatError(Refusal):
    """A request about a chat that cannot be done."""


@dataclass(frozen=True)
class Opened:
    session: SessionRow
    created: bool


@dataclass(frozen=True)
class Choices:
    """The models and agents a chat may be set to run on: those of the settings snapshot the
    next turn runs from (the engine hands them over: `Engine.choices`)."""

    models: tuple[str, ...]
    agents: tuple[str, ...]

    def model(self, raw: object) -> str | None:
        """A model id set up now, or None for the chat chain (422 `unknown_model`)."""
        if raw is None:
            return None
        if not isinstance(raw, str) or raw not in self.models:
            known = ", ".join(self.models) or "none are set up"
            raise ChatError("unknown_model", 422,
                            f"There is no model {_shown(raw)} ({known}).")
        return raw

    def agent(self, raw: object) -> str:
        """An agent set up now; None is the default agent (422 `unknown_agent`)."""
        if raw is None:
            return DEFAULT_AGENT
        if not isinstance(raw, str) or raw not in self.agents:
            raise ChatError("unknown_agent", 422,
                            f"There is no agent {_shown(raw)}; the agents set up are "
                            f"{', '.join(self.agents)}.")
        return raw

    def checked(self, runs_on: Mapping[str, object]) -> dict[str, str | None]:
        """The column values for a change of what a chat runs on (`model`, `agent`)."""
        checked: dict[str, str | None] = {}
        for name, value in runs_on.items():
            if name == "model":
                checked["model"] = self.model(value)
            elif name == "agent":
                checked["agent"] = self.agent(value)
            else:
                raise ChatError("invalid_request", 422,
                                f"A chat runs on {', '.join(CHOICES)}; {name!r} is not one.")
        return checked


def _shown(raw: object) -> str:
    """A value a client sent, quoted for a sentence (its first 100 characters)."""
    text = repr(raw)
    return text if len(text) <= 100 else text[:100] + "…"


async def open_chat(
    db: Database,
    *,
    name: str | None = None,
    memory_mode: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    workspace_dir: str | None = None,
    origin: str = "api",
    trust: str | None = None,
    keep_out: tuple[str, ...] = (),
    choices: Choices | None = None,
    created_by_app: str | None = None,
) -> Opened:
    """Open the kept chat called `name`, or make a new one (named by `naming` when no name).
    A `workspace_dir` that is, contains or lies inside a `keep_out` folder (the Hearth home),
    or is `/`, is refused; with `choices`, so are a model and an agent not among them. With
    `created_by_app` (a verified app's name) the chat made is that app's, and its `name` is
    in the app's own namespace (`naming.key_for`); the owner's name never opens an app's chat
    (409 `name_taken`: an app's chat is no secret to the owner)."""
    given = name_part(name, created_by_app) if name is not None else None
    _check_opening(given, memory_mode, model, agent, choices)
    if workspace_dir is not None:
        workspace_dir = _checked_folder(workspace_dir, keep_out)
    name = key_for(name, created_by_app) if name is not None else None
    for _attempt in range(20):
        try:
            return await db.writing(_open_or_insert, name, memory_mode, agent, model,
                                    workspace_dir, origin, trust, created_by_app)
        except IntegrityError:
            continue  # another request took the name in the same instant; look again
    raise ChatError("name_conflict", 409, "Could not find a free name for the chat; try again.")


@dataclass(frozen=True)
class NewChat:
    """A new chat's settings, checked (`checked_new`): what `insert_new` makes it with."""

    memory_mode: str | None
    agent: str | None
    model: str | None
    workspace_dir: str | None
    trust: str | None
    origin: str
    created_by_app: str | None = None  # a verified app's name: the chat is that app's


def checked_new(*, memory_mode: str | None = None, agent: str | None = None,
                model: str | None = None, workspace_dir: str | None = None,
                trust: str | None = None, origin: str = "api", keep_out: tuple[str, ...] = (),
                choices: Choices | None = None, created_by_app: str | None = None) -> NewChat:
    """A new chat's settings checked as `open_chat` checks them, before anything is written,
    for a caller that makes the chat inside a transaction of its own (`insert_new`)."""
    _check_opening(None, memory_mode, model, agent, choices)
    if trust is not None and trust not in TRUST:
        raise ChatError("invalid_trust", 422, f"trust must be one of {', '.join(TRUST)}.")
    folder = _checked_folder(workspace_dir, keep_out) if workspace_dir is not None else None
    return NewChat(memory_mode, agent, model, folder, trust, origin, created_by_app)


def insert_new(conn: Connection, new: NewChat) -> SessionRow:
    """Make a chat named by `naming` with `new`'s settings, in the caller's transaction."""
    return _open_or_insert(conn, None, new.memory_mode, new.agent, new.model,
                           new.workspace_dir, new.origin, new.trust, new.created_by_app).session


def _check_opening(name: str | None, memory_mode: str | None, model: str | None,
                   agent: str | None, choices: Choices | None) -> None:
    """What `open_chat` refuses before it writes anything (422 with a sentence)."""
    if name is not None and not NAME_PATTERN.match(name):
        raise ChatError(
            "invalid_name", 422,
            "A chat name is 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a "
            "letter or digit.",
        )
    if memory_mode is not None and memory_mode not in MEMORY_MODES:
        raise ChatError(
            "invalid_memory_mode", 422,
            f"memory_mode must be one of {', '.join(MEMORY_MODES)}.",
        )
    if choices is not None:
        choices.model(model)
        choices.agent(agent)


def _checked_folder(raw: str, keep_out: tuple[str, ...]) -> str:
    problem = ChatError("invalid_workspace_dir", 422,
                        "workspace_dir must be the absolute path of a folder that exists.")
    folder = Path(raw)
    try:
        if "\x00" in raw or not folder.is_absolute() or not folder.is_dir():
            raise problem
        real = folder.resolve()
    except (OSError, ValueError) as exc:  # a name too long, a folder that cannot be read
        raise problem from exc
    if real == Path("/"):
        raise ChatError("invalid_workspace_dir", 422,
                        "workspace_dir may not be / (the whole machine); name a project folder.")
    for kept in keep_out:
        home = Path(os.path.realpath(kept))
        if real == home or home in real.parents or real in home.parents:
            raise ChatError(
                "invalid_workspace_dir", 422,
                f"workspace_dir may not be, contain or lie inside the Hearth home ({home}): "
                "it holds the gateway's token, keys and every chat. Choose a folder outside it.")
    return str(real)


def _open_or_insert(
    conn: Connection,
    name: str | None,
    memory_mode: str | None,
    agent: str | None,
    model: str | None,
    workspace_dir: str | None,
    origin: str,
    trust: str | None,
    created_by_app: str | None = None,
) -> Opened:
    if name is not None:
        kept = session_store.get(conn, name)
        if kept is not None:
            if kept.created_by_app != created_by_app:  # never across principals
                raise ChatError("name_taken", 409,
                                f"The name {name!r} is an app's chat; choose another name.")
            if memory_mode is not None and memory_mode != kept.memory_mode:
                raise ChatError(
                    "memory_mode_fixed", 409,
                    f"Chat {name!r} is {kept.memory_mode}; a chat's memory mode is fixed "
                    "when it is made. Start a new chat for another mode.",
                )
            return Opened(kept, created=False)
        key, number = name, chat_number_of(name)
    else:
        key, number = next_chat_name(conn)
        key = key_for(key, created_by_app)  # an app's chats are all in its own namespace
    mode = memory_mode or "persistent"
    row = session_store.insert(
        conn,
        key=key,
        tab_id=uuid.uuid4().hex,
        memory_mode=mode,
        chat_number=number,
        agent=agent or DEFAULT_AGENT,
        model=model,
        workspace_dir=workspace_dir,
        origin=origin,
        title=MODE_TITLES.get(mode),
        trust=trust or "ask",
        created_by_app=created_by_app,
    )
    return Opened(row, created=True)


async def get_chat(db: Database, key: str) -> SessionRow:
    return await db.reading(chat_in, key)


def chat_in(conn: Connection, key: str) -> SessionRow:
    """The chat called `key`, read in an open transaction (404 when there is none)."""
    row = session_store.get(conn, key)
    if row is None:
        raise ChatError("session_not_found", 404, f"There is no chat named {key!r}.")
    return row


async def openings(db: Database, keys: list[str]) -> dict[str, str]:
    """The first message of each of these chats (what an untitled chat is shown by)."""
    return await db.reading(transcript.openings, keys)


async def said_counts(db: Database, keys: list[str]) -> dict[str, int]:
    """How many messages each chat's path holds, yours and the answers (`message_count`
    counts every event: tool calls, results and notices too)."""
    return await db.reading(branches.visible_counts, keys)


@dataclass(frozen=True)
class ChatWindow:
    """A window of a chat's path: its events, each one's variants (by event id, those with
    any), and the visible index of the window's first user or assistant event."""

    session: SessionRow
    events: list[EventRow]
    current_run: RunRow | None
    variants: dict[str, branches.Variants]
    first_visible: int
    earlier: bool = False  # the path holds events before the window's first

    def visible_indexes(self) -> dict[str, int]:
        """Each user and assistant event's visible index, by event id."""
        indexes, next_index = {}, self.first_visible
        for event in self.events:
            if event.kind in branches.VISIBLE:
                indexes[event.event_id] = next_index
                next_index += 1
        return indexes


async def read_chat(db: Database, key: str, *, limit: int,
                    before: int | None) -> ChatWindow:
    return await db.reading(_window, key, limit, before)


def _window(conn: Connection, key: str, limit: int, before: int | None) -> ChatWindow:
    row = chat_in(conn, key)
    events = transcript.window(conn, key, limit, before)
    first = branches.visible_before(conn, key, events[0].seq) if events else 0
    earlier = bool(events) and bool(transcript.window(conn, key, 1, events[0].seq))
    return ChatWindow(row, events, run_store.current(conn, key),
                      branches.variants(conn, key, events), first, earlier)


async def list_chats(
    db: Database,
    *,
    limit: int,
    query: str | None,
    cursor: str | None,
    folder: str | None = None,
    tag: str | None = None,
    archived: bool = False,
    by_app: str | None = None,
) -> tuple[list[SessionRow], str | None]:
    """A page of the listed chats, pinned first, then newest first; `folder` and `tag` keep
    the chats in that folder / carrying that tag (a tag matches whatever its case). Archived
    chats are left out, or with `archived` the only ones listed."""
    after = _decode_cursor(cursor) if cursor else None
    folder = (folder or "").strip() or None
    tag = (tag or "").strip().lower() or None
    rows = await db.reading(session_store.list_page, modes=LISTED_MODES, limit=limit + 1,
                            query=query, folder=folder, tag=tag, after=after,
                            archived=archived, by_app=by_app)
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = _encode_cursor(rows[-1]) if more and rows else None
    return rows, next_cursor


async def update(
    db: Database,
    key: str,
    *,
    title: str | None = None,
    trust: str | None = None,
    filing: Mapping[str, object] | None = None,
    runs_on: Mapping[str, object] | None = None,
    choices: Choices | None = None,
    archived: bool | None = None,
) -> SessionRow:
    """Rename a chat, change its trust setting, what it runs on, file it and/or archive it:
    `filing` holds the parts of its filing to change (`folder`, None to take it out of its
    folder; `tags`, the whole list; `pinned`), `runs_on` the `model` (None: the chat chain)
    and/or `agent` (None: the default agent), each one of `choices`; `archived` takes it out
    of the list or puts it back. All of it is checked before anything changes."""
    if title is not None:
        title = checked_text(title, "title", "invalid_title", TITLE_MAX)
    if trust is not None and trust not in TRUST:
        raise ChatError("invalid_trust", 422, f"trust must be one of {', '.join(TRUST)}.")
    values: dict[str, str | None] = {name: value for name, value in
                                     (("title", title), ("trust", trust)) if value is not None}
    if runs_on:
        if choices is None:
            raise TypeError("a change of what a chat runs on is checked against choices")
        values.update(choices.checked(runs_on))
    filed = checked_filing(filing) if filing else {}
    if archived is not None:
        if not isinstance(archived, bool):
            raise ChatError("invalid_archived", 422, "archived must be true or false.")
        filed["archived"] = archived
    return await db.writing(_update, key, values, filed)


def _update(conn: Connection, key: str, values: dict[str, str | None],
            filed: dict[str, object]) -> SessionRow:
    row = chat_in(conn, key)
    if filed:
        _refuse_restricted(row)
        session_store.set_filing(conn, key, **filed)
    if values:
        by = {"title_by": session_store.TITLE_BY_OWNER} if "title" in values else {}
        session_store.update_fields(conn, key, **values, **by)
    return chat_in(conn, key)


def _refuse_restricted(row: SessionRow) -> None:
    """A chat that is never listed (Incognito, Temporary, a mode that cannot be read) is
    never filed or archived."""
    mode = mode_of(row.memory_mode)
    if restricted(mode):
        raise RestrictedSession(
            f"{why(mode)}; a chat that keeps nothing is never listed, so it cannot be put in "
            "a folder, tagged, pinned or archived.")


@dataclass(frozen=True)
class FilingIndex:
    """The folders and tags the listed chats use, each with how many chats: by name."""

    folders: list[tuple[str, int]]
    tags: list[tuple[str, int]]


async def filing_index(db: Database) -> FilingIndex:
    folders, tags = await db.reading(session_store.filing_counts, modes=LISTED_MODES,
                                     archived=False)  # the listed chats: archived ones aren't
    return FilingIndex(
        folders=sorted(folders.items(), key=lambda item: (item[0].casefold(), item[0])),
        tags=sorted(tags.items()),
    )


def checked_filing(changes: Mapping[str, object]) -> dict[str, object]:
    """The column values for a change of filing, each checked (422 with a sentence)."""
    checked: dict[str, object] = {}
    for name, value in changes.items():
        if name == "folder":
            checked["folder"] = None if value is None else checked_label(value, "folder name")
        elif name == "tags":
            checked["tags"] = checked_tags(value)
        elif name == "pinned":
            if not isinstance(value, bool):
                raise ChatError("invalid_pinned", 422, "pinned must be true or false.")
            checked["pinned"] = value
        else:
            raise ChatError("invalid_request", 422,
                            f"A chat is filed by {', '.join(FILING)}; {name!r} is not one.")
    return checked


def checked_label(raw: object, what: str) -> str:
    """A folder name or a tag: trimmed, 1 to 60 characters, no control characters."""
    return checked_text(raw, what, "invalid_tags" if what == "tag" else "invalid_folder",
                        LABEL_MAX)


def checked_text(raw: object, what: str, code: str, limit: int) -> str:
    """A title, folder name or tag (`what`): trimmed, 1 to `limit` characters, with no control
    character (NUL, a tab, a line break), stray surrogate or text-direction mark (a
    right-to-left override would show a chat's name reversed); refused with `code` (422)."""
    if not isinstance(raw, str):
        raise ChatError(code, 422, f"A {what} must be text.")
    text = raw.strip()
    if not text or len(text) > limit:
        raise ChatError(code, 422, f"A {what} is 1 to {limit} characters once the spaces "
                                   f"around it are trimmed; this one has {len(text)}.")
    if any(unicodedata.category(c) in _LINE_CONTROLS or c in _DIRECTION_CONTROLS
           for c in text):
        raise ChatError(code, 422, f"A {what} cannot hold control characters (a line break, "
                                   "a tab, a text-direction mark).")
    return text


def checked_tags(raw: object) -> list[str]:
    """A chat's tags: each a label, lower-cased, without a comma; duplicates dropped (first
    kept); at most 20."""
    if not isinstance(raw, list | tuple):
        raise ChatError("invalid_tags", 422,
                        "tags must be a list of text (send [] to remove them all).")
    tags = list(dict.fromkeys(checked_label(tag, "tag").lower() for tag in raw))
    if any("," in tag for tag in tags):
        raise ChatError("invalid_tags", 422,
                        "A tag cannot hold a comma (the dashboard separates tags with commas).")
    if len(tags) > MAX_TAGS:
        raise ChatError("invalid_tags", 422,
                        f"A chat may carry at most {MAX_TAGS} tags; this asks for {len(tags)}.")
    return tags


def _encode_cursor(row: SessionRow) -> str:
    raw = json.dumps([row.pinned, row.updated_at, row.key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> Position:
    """The position a cursor names: `[pinned, updated_at, key]` (or `[updated_at, key]`,
    handed out before chats could be pinned: an unpinned position)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if isinstance(parts, list) and len(parts) == 2:
            parts = [False, *parts]
        pinned, stamp, key = parts
        if (not isinstance(pinned, bool) or isinstance(stamp, bool)
                or not isinstance(stamp, int | float) or not isinstance(key, str)
                or not math.isfinite(stamp)):
            raise ValueError("not a position")
        return pinned, float(stamp), key
    except (ValueError, TypeError, OverflowError) as exc:
        raise ChatError(
            "invalid_cursor", 422, "The cursor is not one this server handed out."
        ) from exc
