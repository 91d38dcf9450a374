"""The engine's reads as the surfaces reach them: `Reads`, made once by the engine with its
store (`engine.reads`), so a surface never holds the store handle. Every method is awaited and
reads in one snapshot on the store's reader threads.

It answers for a chat (its row, the listed chats, a window of its path, the first words of
untitled ones, the folders and tags in use, its map, what is running and waiting in it), for
a run (its status and receipts, the chat it belongs to, the page a reconnecting stream
replays), for the sidebar, search, usage (`Totals`, folded in here), the standing grants and
the apps. The store's row types a surface reads (and never writes) are named here too, so a
surface needs nothing of `hearth.store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from hearth.engine.access import apps
from hearth.engine.operations import chat_map, search as chat_search
from hearth.engine.operations.search import Asked, SearchPage
from hearth.engine.reads import queries, sidebar
from hearth.engine.reads.queries import Replay
from hearth.engine.reads.sidebar import Sidebar
from hearth.engine.views import grant_view
from hearth.sessions import chats
from hearth.sessions.chats import ChatWindow, FilingIndex
from hearth.store import approvals, attachments as attachment_store, usage as usage_store
from hearth.store.apps import AppRow
from hearth.store.db import Database, now
from hearth.store.memory import DOCUMENT, MemoryItem
from hearth.store.sessions import SessionRow
from hearth.store.usage import Total

__all__ = ["DOCUMENT", "Asked", "ChatWindow", "FilingIndex", "MemoryItem", "Reads", "Replay",
           "SearchPage", "SessionRow", "Sidebar", "Total", "Totals", "today"]


@dataclass(frozen=True)
class Totals:
    """One span's usage, each list over the same calls (so each adds up to the same sum):
    model calls, tokens and cost per UTC day, model, provider, purpose and outcome."""

    by_day: list[Total]
    by_model: list[Total]
    by_provider: list[Total]
    by_purpose: list[Total]
    by_outcome: list[Total]


def today() -> str:
    """Today's UTC day as 'YYYY-MM-DD' (the day usage is counted under)."""
    return usage_store.day_of(now())


def _totals(conn: Connection, since_day: str) -> Totals:
    return Totals(*(usage_store.totals_by(conn, axis, since_day) for axis in usage_store.AXES))


class Reads:
    """What the surfaces read of the engine's records, each in one snapshot."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- chats ---------------------------------------------------------------------------------

    async def chat(self, key: str) -> SessionRow:
        """The chat called `key` (404 `session_not_found` when there is none)."""
        return await chats.get_chat(self._db, key)

    async def chats(self, *, limit: int, query: str | None, cursor: str | None,
                    folder: str | None = None, tag: str | None = None,
                    archived: bool = False, by_app: str | None = None,
                    ) -> tuple[list[SessionRow], str | None]:
        """A page of the listed chats and the cursor of the next (see `chats.list_chats`)."""
        return await chats.list_chats(self._db, limit=limit, query=query, cursor=cursor,
                                      folder=folder, tag=tag, archived=archived, by_app=by_app)

    async def window(self, key: str, *, limit: int, before: int | None) -> ChatWindow:
        """A window of the chat's path, newest last, ending before seq `before`."""
        return await chats.read_chat(self._db, key, limit=limit, before=before)

    async def openings(self, keys: list[str]) -> dict[str, str]:
        """The first message of each of these chats (what an untitled chat is shown by)."""
        return await chats.openings(self._db, keys)

    async def said_counts(self, keys: list[str]) -> dict[str, int]:
        """How many messages (yours and the answers) each of these chats holds."""
        return await chats.said_counts(self._db, keys)

    async def filing_index(self) -> FilingIndex:
        return await chats.filing_index(self._db)

    async def sidebar(self) -> Sidebar:
        return await sidebar.sidebar(self._db)

    async def chat_map(self, key: str) -> list[dict[str, Any]]:
        """The marks of the chat's path (its map), 404 for no such chat."""
        return await chat_map.chat_map(self._db, key)

    async def search(self, asked: Asked) -> SearchPage:
        return await chat_search.search(self._db, asked)

    # -- what runs and waits ---------------------------------------------------------------------

    async def activity(self, key: str, run_ids: set[str]
                       ) -> tuple[str | None, set[str], list[dict[str, Any]]]:
        """The run holding the chat, which of `run_ids` wait behind it, its pending
        approvals."""
        return await queries.of_chat(self._db, key, run_ids)

    async def heard(self, key: str) -> dict[str, str]:
        """The words of the chat's voice notes heard so far, by attachment id."""
        return await self._db.reading(attachment_store.heard_in, key)

    async def pending_approvals(self, key: str) -> list[dict[str, Any]]:
        """The chat's approvals still waiting for an answer."""
        return await queries.pending_of(self._db, key)

    async def is_queued(self, key: str, run_id: str | None) -> bool:
        return await queries.is_queued(self._db, key, run_id)

    async def approval_chat(self, approval_id: str) -> str | None:
        return await queries.approval_chat(self._db, approval_id)

    async def run_chat(self, run_id: str) -> str | None:
        return await queries.run_chat(self._db, run_id)

    async def run_status(self, run_id: str, with_message: bool = False
                         ) -> dict[str, Any] | None:
        """The run's view; with `with_message`, its answer's view too (`queries.run_status`)."""
        return await queries.run_status(self._db, run_id, with_message)

    async def run_state(self, run_id: str) -> str | None:
        """The run's status alone (None: no such run): cheaper than its view."""
        return await queries.run_state(self._db, run_id)

    async def current_run(self, key: str) -> str | None:
        return await queries.current_run(self._db, key)

    async def replay_page(self, key: str, after_seq: int, limit: int) -> Replay:
        return await queries.replay_page(self._db, key, after_seq, limit)

    # -- usage, grants, apps ---------------------------------------------------------------------

    async def usage_totals(self, since_day: str) -> Totals:
        """The usage since `since_day`, read in one snapshot."""
        return await self._db.reading(_totals, since_day)

    async def grants(self) -> list[dict[str, Any]]:
        """Every standing grant, newest first."""
        return [grant_view(row) for row in await self._db.reading(approvals.list_grants)]

    async def apps(self) -> list[AppRow]:
        return await apps.listed(self._db)

    async def own_keys(self, app: str, keys: set[str]) -> set[str]:
        """Which of these chats the app started (what a list shows an app of itself)."""
        return await apps.own_keys(self._db, app, keys)

    # -- the store itself ------------------------------------------------------------------------

    def store_health(self) -> dict[str, Any]:
        """The store as /healthz shows it: its dialect, and the writer's transactions, the
        writes in them and how many of them were synced (held a promise)."""
        writer = self._db.writer
        return {"db": self._db.dialect,
                "store": {"transactions": writer.batches, "writes": writer.jobs,
                          "synced": writer.synced}}
