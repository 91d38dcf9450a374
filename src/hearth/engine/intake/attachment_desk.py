"""The attachments as the surfaces handle them: a file uploaded to a chat, listed, opened.
(Here, in intake, because a file comes in as a message does: an upload, or the image parts of
an OpenAI request, `engine.intake.openai_requests`.)

`AttachmentDesk` is made once by the engine (`engine.attachments`). An upload streams into
the chat's folder as it arrives (`sessions/attachments.py`: hashed, size-limited, sniffed,
an image checked), then its row is written as a promise (held: not sent yet). The message
that names it sends it (`Engine.send(..., files=...)`, linked in the admission's own
transaction). Every method is awaited; the file work runs off the event loop, in chunks
gathered to `CHUNK_BYTES` so a large upload costs few thread hops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from hearth.config import AttachmentsConfig
from hearth.errors import Refusal
from hearth.sessions import attachments as files
from hearth.store import attachments as attachment_store, sessions as session_store
from hearth.store.attachments import AttachmentRow
from hearth.store.db import Database

CHUNK_BYTES = 256 * 1024


class AttachmentDesk:
    def __init__(self, db: Database, chats_dir: Path,
                 settings: Callable[[], AttachmentsConfig]) -> None:
        self._db = db
        self._chats_dir = chats_dir
        self._settings = settings

    async def receive_bytes(self, key: str, name: str | None, data: bytes) -> AttachmentRow:
        """`receive`, for a file already whole in memory (a request's image part)."""
        async def once() -> AsyncIterator[bytes]:
            yield data

        return await self.receive(key, name, once())

    async def receive(self, key: str, name: str | None,
                      chunks: AsyncIterator[bytes]) -> AttachmentRow:
        """Keep one uploaded file for the chat `key`, not sent yet (refused: nothing kept)."""
        if await self._db.reading(session_store.get, key) is None:
            raise Refusal("session_not_found", 404, f"There is no chat named {key!r}.")
        folder = files.folder_of(self._chats_dir, key)
        receiving = await asyncio.to_thread(files.Receiving, folder,
                                            self._settings().max_file_bytes)
        try:
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
            kept = await asyncio.to_thread(receiving.keep)
        except BaseException:
            await asyncio.to_thread(receiving.discard)
            raise
        return await self._db.writing(attachment_store.hold, key, kept.sha256,
                                      files.clean_name(name), kept.content_type, kept.size)

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
