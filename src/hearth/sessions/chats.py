"""Chats as the surfaces see them: open or create, list, read a window, rename.

A new chat is named by `naming`; a kept chat's name opens that chat, and asking it for another
memory mode is refused (its mode is fixed when it is made). Incognito and Temporary chats are
never listed.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import IntegrityError

from hearth.errors import Refusal
from hearth.sessions.naming import NAME_PATTERN, chat_number_of, next_chat_name
from hearth.store import runs as run_store
from hearth.store import sessions as session_store
from hearth.store import transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow

MEMORY_MODES = ("persistent", "incognito", "temporary")
TRUST = ("ask", "trusted")  # trusted: calls that may change something run without asking
LISTED_MODES = ("persistent",)
MODE_TITLES = {"incognito": "Incognito chat", "temporary": "Temporary chat"}


class ChatError(Refusal):
    """A request about a chat that cannot be done."""


@dataclass(frozen=True)
class Opened:
    session: SessionRow
    created: bool


def open_chat(
    db: Database,
    *,
    name: str | None = None,
    memory_mode: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    workspace_dir: str | None = None,
    origin: str = "api",
    trust: str | None = None,
) -> Opened:
    """Open the kept chat called `name`, or make a new one (named by `naming` when no name)."""
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
    if workspace_dir is not None:
        workspace_dir = _checked_folder(workspace_dir)
    for _attempt in range(20):
        try:
            return _open_or_insert(db, name, memory_mode, agent, model, workspace_dir, origin,
                                   trust)
        except IntegrityError:
            continue  # another request took the name in the same instant; look again
    raise ChatError("name_conflict", 409, "Could not find a free name for the chat; try again.")


def _checked_folder(raw: str) -> str:
    problem = ChatError("invalid_workspace_dir", 422,
                        "workspace_dir must be the absolute path of a folder that exists.")
    folder = Path(raw)
    try:
        if "\x00" in raw or not folder.is_absolute() or not folder.is_dir():
            raise problem
        return str(folder.resolve())
    except (OSError, ValueError) as exc:  # a name too long, a folder that cannot be read
        raise problem from exc


def _open_or_insert(
    db: Database,
    name: str | None,
    memory_mode: str | None,
    agent: str | None,
    model: str | None,
    workspace_dir: str | None,
    origin: str,
    trust: str | None,
) -> Opened:
    with db.write() as conn:
        if name is not None:
            kept = session_store.get(conn, name)
            if kept is not None:
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
        mode = memory_mode or "persistent"
        row = session_store.insert(
            conn,
            key=key,
            tab_id=uuid.uuid4().hex,
            memory_mode=mode,
            chat_number=number,
            agent=agent or "default",
            model=model,
            workspace_dir=workspace_dir,
            origin=origin,
            title=MODE_TITLES.get(mode),
            trust=trust or "ask",
        )
        return Opened(row, created=True)


def get_chat(db: Database, key: str) -> SessionRow:
    with db.read() as conn:
        row = session_store.get(conn, key)
    if row is None:
        raise ChatError("session_not_found", 404, f"There is no chat named {key!r}.")
    return row


@dataclass(frozen=True)
class ChatWindow:
    session: SessionRow
    events: list[EventRow]
    current_run: RunRow | None


def read_chat(db: Database, key: str, *, limit: int, before: int | None) -> ChatWindow:
    with db.read() as conn:
        row = session_store.get(conn, key)
        if row is None:
            raise ChatError("session_not_found", 404, f"There is no chat named {key!r}.")
        events = transcript.window(conn, key, limit, before)
        current = run_store.current(conn, key)
    return ChatWindow(row, events, current)


def list_chats(
    db: Database, *, limit: int, query: str | None, cursor: str | None
) -> tuple[list[SessionRow], str | None]:
    after = _decode_cursor(cursor) if cursor else None
    with db.read() as conn:
        rows = session_store.list_page(
            conn, modes=LISTED_MODES, limit=limit + 1, query=query, after=after
        )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = _encode_cursor(rows[-1]) if more and rows else None
    return rows, next_cursor


def update(db: Database, key: str, *, title: str | None = None,
           trust: str | None = None) -> SessionRow:
    """Rename a chat and/or change its trust setting."""
    values = {name: value for name, value in (("title", title), ("trust", trust))
              if value is not None}
    with db.write() as conn:
        if not session_store.update_fields(conn, key, **values):
            raise ChatError("session_not_found", 404, f"There is no chat named {key!r}.")
        row = session_store.get(conn, key)
    assert row is not None
    return row


def _encode_cursor(row: SessionRow) -> str:
    raw = json.dumps([row.updated_at, row.key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, key = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return float(stamp), str(key)
    except (ValueError, TypeError) as exc:
        raise ChatError(
            "invalid_cursor", 422, "The cursor is not one this server handed out."
        ) from exc
