"""What the dashboard's sidebar shows beside every page, read in one transaction: the kept
chats (pinned first, then by last activity; archived ones left out) and the folders and tags
they are filed in, the restricted chats (Incognito and Temporary: never in the kept list or
its search, so in a list of their own), which chats are running a turn or waiting on an
approval, the first words an untitled chat is called by (and an Incognito or Temporary one
still called by its mode: its mark says the mode), each kept chat's folder and tags (its menu
and drag and drop file it), and how many things the delivery desk holds for the owner
(`desk`: failed or unknown deliveries, chores owed after many tries;
`engine.delivery.desk.needs_owner`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from hearth.engine.delivery import desk
from hearth.sessions.chats import MODE_TITLES
from hearth.store import approvals, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.sessions import SessionRow

KEPT_MODES = ("persistent",)
RESTRICTED_MODES = ("incognito", "temporary")
KEPT_LIMIT = 150  # the sidebar's reach; older chats are found with search or the full list
RESTRICTED_LIMIT = 50


@dataclass(frozen=True)
class SidebarChat:
    key: str
    title: str | None
    opening: str | None  # the first message, for a chat without a title
    memory_mode: str
    pinned: bool
    updated_at: float
    running: bool  # a turn holds the chat
    waiting: bool  # a call in it waits on the owner's approval
    created_by_app: str | None = None  # the app that started it ("Started by …")
    folder: str | None = None  # the folder it is filed in (the item's menu, drag and drop)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sidebar:
    kept: list[SidebarChat]
    restricted: list[SidebarChat]
    waiting: int  # approvals pending across every chat
    folders: list[tuple[str, int]]  # each folder in use, with how many kept chats are in it
    tags: list[tuple[str, int]]
    desk: int = 0  # what the delivery desk holds for the owner


async def sidebar(db: Database) -> Sidebar:
    return await db.reading(_sidebar)


def _sidebar(conn: Connection) -> Sidebar:
    kept = session_store.list_page(conn, modes=KEPT_MODES, limit=KEPT_LIMIT, archived=False)
    folders, tags = session_store.filing_counts(conn, modes=KEPT_MODES, archived=False)
    restricted = session_store.list_page(conn, modes=RESTRICTED_MODES, limit=RESTRICTED_LIMIT)
    pending = approvals.pending(conn)
    waiting = {approval.session_key for approval in pending}
    untitled = [row.key for row in (*kept, *restricted) if not _title(row)]
    openings = transcript.openings(conn, untitled) if untitled else {}

    def shown(row: SessionRow) -> SidebarChat:
        return SidebarChat(key=row.key, title=_title(row), opening=openings.get(row.key),
                           memory_mode=row.memory_mode, pinned=row.pinned,
                           updated_at=row.updated_at, running=row.writer_run_id is not None,
                           waiting=row.key in waiting, created_by_app=row.created_by_app,
                           folder=row.folder, tags=row.tags)

    return Sidebar(kept=[shown(row) for row in kept],
                   restricted=[shown(row) for row in restricted], waiting=len(pending),
                   folders=sorted(folders.items(), key=lambda f: (f[0].casefold(), f[0])),
                   tags=sorted(tags.items()), desk=desk.needs_owner(conn))


def _title(row: SessionRow) -> str | None:
    """The title the sidebar shows: none for an Incognito or Temporary chat still called by
    its mode (its mark says the mode; its first words tell one such chat from another)."""
    if row.title is not None and MODE_TITLES.get(row.memory_mode) == row.title:
        return None
    return row.title
