"""The purge of one chat from the store and the disk, and which chats end forgotten.

A purge removes the chat's transcript events first, then its runs, its tool-call ledger, its
approvals and its own working folder (`sessions.folders`; a `workspace_dir` the owner gave is
never removed), and last the session row. Each part goes on its own; if any part fails, the
others still go but the session row stays — the chat is still kept, the purge says why, and
purging it again finishes the job. The last step sweeps anything appended meanwhile along with
the row, in one transaction, and withdraws from the chat's audit rows what its tool calls
acted on (a path or a command can carry what the chat said; who decided what stays). Which
chats are a chat's helpers (`helper_keys`) is read here too: the engine purges a restricted
chat's helpers, each this same way, before the chat itself.

The engine composes this with stopping the chat's turn and forgetting its memory
(`engine.operations.deletion`); this module knows no engine.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from sqlalchemy import Connection, Table, delete, exists, select, update
from sqlalchemy.exc import SQLAlchemyError

from hearth.faults import fail_point
from hearth.sessions.folders import chat_folder, forgotten_when_ended
from hearth.store import sessions as session_store
from hearth.store.db import Database, now
from hearth.store.runs import ACTIVE
from hearth.store.schema import (
    approvals,
    attachments,
    audit,
    model_calls,
    runs,
    sessions,
    tool_calls,
    transcript_events,
)
from hearth.store.sessions import SessionRow

# What a purge removes, in order, with the words its failure is said in.
PARTS: tuple[tuple[str, Table, str], ...] = (
    ("messages", transcript_events, "its messages"),
    ("runs", runs, "its turns"),
    ("tool_calls", tool_calls, "its tool-call records"),
    ("approvals", approvals, "its approvals"),
    ("attachments", attachments, "its attachments' records"),  # their bytes: its folder
)


@dataclass
class Removed:
    messages: int = 0
    runs: int = 0
    tool_calls: int = 0
    approvals: int = 0
    attachments: int = 0
    folder: bool = False

    def add(self, part: str, count: int) -> None:
        setattr(self, part, getattr(self, part) + count)

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


@dataclass
class Purge:
    """What a purge removed, what it could not (sentences), and whether the chat is gone."""

    key: str
    removed: Removed = field(default_factory=Removed)
    failures: list[str] = field(default_factory=list)
    row_removed: bool = False


def begin(conn: Connection, key: str, idle_before: float | None = None) -> SessionRow | None:
    """The chat about to be purged (None if there is none, or with `idle_before`, if it is not
    an idle chat that ends forgotten). Bumps its generation, so a run still queued for it is
    stale when its lane reaches it and never starts. A write: run by the one writer after
    every message admitted before the chat was marked deleting."""
    if idle_before is not None and not idle_temporary_keys(conn, idle_before, key):
        return None
    conn.execute(update(sessions).where(sessions.c.key == key)
                 .values(generation=sessions.c.generation + 1))
    return session_store.get(conn, key)


def purge(db: Database, session: SessionRow, chats_dir: Path) -> Purge:
    """Everything of the chat, then its row (kept if anything else failed)."""
    done = purge_contents(db, session, chats_dir)
    remove_row(db, done)
    return done


def purge_contents(db: Database, session: SessionRow, chats_dir: Path) -> Purge:
    """Everything of the chat but its row, each part on its own."""
    done = Purge(session.key)
    for part, table, words in PARTS:
        _attempt(done, words, partial(_delete_part, db, session.key, part, table, done))
    _attempt(done, _folder_words(chats_dir, session.key),
             partial(_remove_folder, session, chats_dir, done))
    return done


def remove_row(db: Database, done: Purge) -> None:
    """The session row, with whatever was appended since its parts went — unless a part
    failed (then the chat is still kept and a later purge finishes)."""
    if done.failures:
        return
    try:
        with db.write() as conn:
            for part, table, _words in PARTS:
                done.removed.add(part, _delete_rows(conn, table, done.key))
            _withdraw_targets(conn, done.key)
            # a model call's row keeps its figures, never the name of a chat that is gone
            conn.execute(update(model_calls).where(model_calls.c.session_key == done.key)
                         .values(session_key=None))
            conn.execute(delete(sessions).where(sessions.c.key == done.key))
    except SQLAlchemyError as error:
        done.failures.append(f"the chat itself could not be removed ({_cause(error)})")
        return
    done.row_removed = True


def _attempt(done: Purge, words: str, step: Callable[[], None]) -> None:
    try:
        step()
    except (SQLAlchemyError, OSError) as error:
        done.failures.append(f"{words} could not be removed ({_cause(error)})")


def _delete_part(db: Database, key: str, part: str, table: Table, done: Purge) -> None:
    with db.write() as conn:
        done.removed.add(part, _delete_rows(conn, table, key))


def _delete_rows(conn: Connection, table: Table, key: str) -> int:
    return int(conn.execute(delete(table).where(table.c.session_key == key)).rowcount)


def _withdraw_targets(conn: Connection, key: str) -> None:
    """Blank the `target` of the chat's audit rows (a Temporary or Incognito chat's have none)."""
    rows = conn.execute(select(audit.c.id, audit.c.detail).where(audit.c.session_key == key))
    for row_id, detail in rows.all():
        if isinstance(detail, dict) and detail.get("target") is not None:
            conn.execute(update(audit).where(audit.c.id == row_id)
                         .values(detail={**detail, "target": None}))


def _folder_words(chats_dir: Path, key: str) -> str:
    try:
        return f"its working folder {chat_folder(chats_dir, key)}"
    except ValueError:
        return "its working folder"


def _remove_folder(session: SessionRow, chats_dir: Path, done: Purge) -> None:
    try:
        folder = chat_folder(chats_dir, session.key)
    except ValueError:
        return  # a key that cannot name a folder never had one
    if _holds_given_workspace(session, folder):
        return  # the owner's folder: never removed
    fail_point("purge_folder")
    if folder.is_symlink():
        folder.unlink()  # the link, never what it points at
    elif folder.exists():
        shutil.rmtree(folder)
    else:
        return
    done.removed.folder = True


def _holds_given_workspace(session: SessionRow, folder: Path) -> bool:
    """Is the folder the owner gave this chat the chat's own folder, or inside it?"""
    if not session.workspace_dir:
        return False
    given = Path(session.workspace_dir).resolve()
    own = folder.resolve()
    return given == own or own in given.parents


def _cause(error: SQLAlchemyError | OSError) -> str:
    """Why, in words that carry no message text (a database error's statement could)."""
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return type(getattr(error, "orig", None) or error).__name__


def temporary_keys(conn: Connection) -> list[str]:
    """Every chat that is forgotten when it ends (Temporary)."""
    rows = conn.execute(select(sessions.c.key, sessions.c.memory_mode)
                        .where(sessions.c.memory_mode != "persistent"))
    return [key for key, mode in rows if forgotten_when_ended(mode)]


def idle_temporary_keys(conn: Connection, idle_before: float,
                        key: str | None = None) -> list[str]:
    """Chats forgotten when they end that nothing ran in since `idle_before` (UNIX seconds)
    and that have no run admitted or running; with `key`, only that chat (if it is one)."""
    busy = exists().where(runs.c.session_key == sessions.c.key, runs.c.status.in_(ACTIVE))
    stmt = (select(sessions.c.key, sessions.c.memory_mode)
            .where(sessions.c.memory_mode != "persistent", sessions.c.updated_at < idle_before,
                   ~busy)
            .order_by(sessions.c.updated_at))
    if key is not None:
        stmt = stmt.where(sessions.c.key == key)
    return [found for found, mode in conn.execute(stmt) if forgotten_when_ended(mode)]


def helper_keys(conn: Connection, key: str) -> list[str]:
    """The chats the chat started as its helpers (`parent_key`), oldest first."""
    return list(conn.execute(select(sessions.c.key).where(sessions.c.parent_key == key)
                             .order_by(sessions.c.created_at, sessions.c.key)).scalars())


def running_run(conn: Connection, key: str) -> str | None:
    """The chat's run marked running, if any (a turn, or a tool call for an agent CLI)."""
    found: str | None = conn.execute(select(runs.c.run_id).where(
        runs.c.session_key == key, runs.c.status == "running").limit(1)).scalar()
    return found


def cancel_pending(conn: Connection, key: str) -> list[str]:
    """Cancel the chat's approvals still waiting on the owner; their ids (to wake waiters)."""
    ids = list(conn.execute(select(approvals.c.id).where(
        approvals.c.session_key == key, approvals.c.status == "pending")).scalars())
    if ids:
        conn.execute(update(approvals).where(approvals.c.id.in_(ids))
                     .values(status="cancelled", decided_at=now()))
    return ids
