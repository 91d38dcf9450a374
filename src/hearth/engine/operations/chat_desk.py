"""What the surfaces do to a chat as a whole, beside sending to it: `Chats`, made once by the
engine with its store (`engine.chats`), every method awaited. It makes a chat (or opens the
kept one of that name), changes what a chat is called, runs on and is filed under, exports one
chat or every kept chat, imports an export as new chats, and compacts a chat's model view now.
The rules are the modules it calls (`sessions.chats`, `export`, `jsonl`, `importing`,
`engine.turn.compaction.on_request`); deleting a chat and the doors are the engine's own methods."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

from hearth.engine.operations import export, importing, jsonl
from hearth.engine.turn.compaction import on_request
from hearth.engine.turn.runner import TurnDeps
from hearth.sessions import chats
from hearth.sessions.chats import Choices
from hearth.store.db import Database
from hearth.store.sessions import SessionRow


class Chats:
    """Make, change, export, import and compact chats."""

    def __init__(self, db: Database, deps: Callable[[], TurnDeps],
                 keep_out: tuple[str, ...]) -> None:
        self._db = db
        self._deps = deps  # the snapshot the next turn runs from (a compaction walks its chain)
        self._keep_out = keep_out  # folders a chat may not work in (the Hearth home)

    async def open(self, *, name: str | None = None, memory_mode: str | None = None,
                   agent: str | None = None, model: str | None = None,
                   workspace_dir: str | None = None, trust: str | None = None,
                   choices: Choices | None = None,
                   created_by_app: str | None = None) -> chats.Opened:
        """Open the kept chat called `name`, or make a new one (see `chats.open_chat`)."""
        return await chats.open_chat(
            self._db, name=name, memory_mode=memory_mode, agent=agent, model=model,
            workspace_dir=workspace_dir, trust=trust, keep_out=self._keep_out,
            choices=choices, created_by_app=created_by_app)

    async def update(self, key: str, *, title: str | None = None, trust: str | None = None,
                     filing: Mapping[str, object] | None = None,
                     runs_on: Mapping[str, object] | None = None,
                     choices: Choices | None = None,
                     archived: bool | None = None) -> SessionRow:
        """Rename, change trust, what it runs on, its filing or archive it (`chats.update`)."""
        return await chats.update(self._db, key, title=title, trust=trust, filing=filing,
                                  runs_on=runs_on, choices=choices, archived=archived)

    async def export(self, key: str, fmt: str = "json") -> export.Export:
        """The chat as a download (409 `export_refused` for a chat that keeps nothing)."""
        return await export.export_chat(self._db, key, fmt, self._files_dir())

    def export_all(self) -> AsyncIterator[bytes]:
        """Every kept chat as JSON Lines, line by line as it is read."""
        return jsonl.everything(self._db, self._files_dir())

    async def import_file(self, choices: Choices, body: bytes, *, line_offset: int = 0,
                          dry_run: bool = False) -> importing.ImportResult:
        """Check an export, then (unless `dry_run`) write each chat as a new chat."""
        return await importing.import_file(self._db, choices, body, line_offset=line_offset,
                                           dry_run=dry_run, files_dir=self._files_dir())

    def _files_dir(self) -> Path:
        """Where chats keep their own folders, their files in them."""
        deps = self._deps()
        return deps.chats_dir or deps.default_workspace.parent / "sessions"

    async def compact(self, key: str) -> on_request.Compacted:
        """Compact the chat's model view now (`engine.turn.compaction.on_request`)."""
        return await on_request.compact(self._deps(), key)
