"""The attachments as the surfaces handle them: a file uploaded to a chat, listed, opened.
(Here, in intake, because a file comes in as a message does: an upload, or the image parts of
an OpenAI request, `engine.intake.openai_requests`.)

`AttachmentDesk` is made once by the engine (`engine.attachments`). An upload streams into
the chat's folder as it arrives (`sessions/attachments.py`: hashed, size-limited, sniffed,
an image checked), then its row is written as a promise (held: not sent yet). The message
that names it sends it (`Engine.send(..., files=...)`, linked in the admission's own
transaction). Every method is awaited; the file work runs off the event loop, in chunks
gathered to `CHUNK_BYTES` so a large upload costs few thread hops.

An upload is held to its chat's and its app's quotas (`attachment_quotas`: checked before its
bytes are read, and again in the transaction that keeps its row). One never sent is removed
after `[attachments] held_seconds` (`expire`, run by `engine.background.held_uploads`): its
row, and its file when no other row of the chat keeps the same bytes. A chat's uploads and
its expiry take turns (`_one_at_a_time`), so a file is never removed under an upload of the
same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from sqlalchemy import Connection

from hearth.config import AppsConfig, AttachmentsConfig
from hearth.engine.intake import attachment_quotas
from hearth.engine.intake.attachment_quotas import Quotas
from hearth.errors import Refusal
from hearth.sessions import attachments as files
from hearth.store import attachments as attachment_store, sessions as session_store
from hearth.store.attachments import AttachmentRow
from hearth.store.db import Database

CHUNK_BYTES = 256 * 1024


class AttachmentDesk:
    def __init__(self, db: Database, chats_dir: Path,
                 settings: Callable[[], AttachmentsConfig],
                 apps: Callable[[], AppsConfig] = AppsConfig) -> None:
        self._db = db
        self._chats_dir = chats_dir
        self._settings = settings
        self._apps = apps
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # a chat's, while used

    async def receive_bytes(self, key: str, name: str | None, data: bytes) -> AttachmentRow:
        """`receive`, for a file already whole in memory (a request's image part)."""
        async def once() -> AsyncIterator[bytes]:
            yield data

        return await self.receive(key, name, once())

    async def receive(self, key: str, name: str | None,
                      chunks: AsyncIterator[bytes]) -> AttachmentRow:
        """Keep one uploaded file for the chat `key`, not sent yet (refused: nothing kept)."""
        chat = await self._db.reading(session_store.get, key)
        if chat is None:
            raise Refusal("session_not_found", 404, f"There is no chat named {key!r}.")
        quotas = Quotas(self._settings(), self._apps())
        app = chat.created_by_app
        await self._db.reading(attachment_quotas.check, quotas, key, app, 1)  # full already?
        receiving = await asyncio.to_thread(files.Receiving, files.folder_of(self._chats_dir, key),
                                            quotas.files.max_file_bytes)
        try:
            await self._stream(receiving, chunks)
            async with self._one_at_a_time(key):
                kept = await asyncio.to_thread(receiving.keep)
                return await self._hold(key, app, quotas, kept, files.clean_name(name))
        except BaseException:
            await asyncio.to_thread(receiving.discard)
            raise

    @staticmethod
    async def _stream(receiving: files.Receiving, chunks: AsyncIterator[bytes]) -> None:
        pending = bytearray()
        async for chunk in chunks:
            pending += chunk
            if len(pending) >= CHUNK_BYTES:
                await asyncio.to_thread(receiving.add, bytes(pending))
                pending.clear()
        if pending:
            await asyncio.to_thread(receiving.add, bytes(pending))
        if receiving.size == 0:
            raise Refusal("empty_attachment", 422, "The file is empty; nothing was kept.")

    async def _hold(self, key: str, app: str | None, quotas: Quotas, kept: files.Kept,
                    name: str) -> AttachmentRow:
        """The kept file's row, within the quotas; refused, its bytes go unless another row
        of the chat keeps them."""
        try:
            row: AttachmentRow = await self._db.writing(
                _hold_within, quotas, key, app, kept, name)
        except Refusal:
            await self._forget_files(key, [kept.sha256])
            raise
        return row

    async def expire(self, before: float) -> int:
        """Remove every upload not sent that was made before `before` (epoch seconds), and
        each one's file that no other row of its chat keeps; how many were removed."""
        removed = 0
        while rows := await self._db.reading(attachment_store.held_before, before):
            by_chat: dict[str, list[str]] = {}
            for row in rows:
                by_chat.setdefault(row.session_key, []).append(row.id)
            for key, ids in by_chat.items():
                async with self._one_at_a_time(key):
                    gone, unkept = await self._db.writing(attachment_store.drop_held, key, ids,
                                                          before)
                    await asyncio.to_thread(self._unlink, key, unkept)
                removed += gone
        return removed

    async def _forget_files(self, key: str, hashes: list[str]) -> None:
        """Remove those of `hashes` whose bytes no row of the chat keeps."""
        kept = await self._db.reading(attachment_store.kept_hashes, key, hashes)
        await asyncio.to_thread(self._unlink, key, [h for h in hashes if h not in kept])

    def _unlink(self, key: str, hashes: list[str]) -> None:
        for sha256 in hashes:
            files.path_of(self._chats_dir, key, sha256).unlink(missing_ok=True)

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, key: str) -> AsyncIterator[None]:
        """The chat's uploads and its expiry one at a time (its lock kept only while used)."""
        lock, users = self._turns.get(key, (asyncio.Lock(), 0))
        self._turns[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[key]
            if users == 1:
                del self._turns[key]
            else:
                self._turns[key] = (lock, users - 1)

    async def listed(self, key: str) -> list[AttachmentRow]:
        """The chat's attachments, sent and held, oldest first."""
        return await self._db.reading(attachment_store.of_chat, key)

    async def opened(self, key: str, attachment_id: str) -> tuple[AttachmentRow, Path]:
        """One attachment of the chat and where its bytes are (404 when it has none)."""
        row = await self._db.reading(attachment_store.get, key, attachment_id)
        if row is None:
            raise Refusal("attachment_not_found", 404,
                          f"Chat {key!r} has no attachment {attachment_id!r}.")
        return row, files.path_of(self._chats_dir, key, row.sha256)


def _hold_within(conn: Connection, quotas: Quotas, key: str, app: str | None,
                 kept: files.Kept, name: str) -> AttachmentRow:
    """The upload's row, in the transaction that checks the quotas it must fit in."""
    attachment_quotas.check(conn, quotas, key, app, kept.size)
    return attachment_store.hold(conn, key, kept.sha256, name, kept.content_type, kept.size)
