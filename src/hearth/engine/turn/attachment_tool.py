"""The `open_attachment` tool: the agent opens a file the chat was sent, by its name.

The model reads a message's files when it is sent (`engine/turn/attached.py`), within the
text budget; later, or for the part it was not given, it can open one again by name. The file
is looked up among the chat's own sent attachments (never a path: nothing outside the chat's
files can be named), and read as the turn would read it: a text file or a PDF as text, from
`offset` characters on; an audio file as its transcript; an image is said to be shown to a
model with vision. It only reads, so it never needs an approval.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hearth.sessions.attachments import read_text
from hearth.store import attachments as attachment_store
from hearth.store.db import Database
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused


class OpenAttachment:
    name = "open_attachment"
    description = (
        "Open a file this chat was sent (an attachment of a message), by its name: a text "
        "file or a PDF as text (from `offset` characters on), a voice note as its words."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The file's name, as the message shows it"},
            "offset": {"type": "integer", "minimum": 0,
                       "description": "Where to start reading, in characters (0: the start)"},
        },
        "required": ["name"],
    }
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    def __init__(self, db: Database) -> None:
        self.db = db

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        name = str(args.get("name", "")).strip()
        offset = args.get("offset", 0)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ToolRefused("Refused: offset must be a whole number of at least 0.")
        row = await self.db.reading(attachment_store.named, ctx.session_key, name)
        if row is None or ctx.attachments_dir is None:
            raise ToolRefused(f"Refused: this chat was sent no file called {name!r}.")
        if row.content_type.startswith("image/"):
            return ToolOutcome(f"{row.name} is an image: a model with vision sees it with its "
                               "message; it has no text to read.", f"Looked at {row.name}.")
        if row.content_type.startswith("audio/"):
            words = row.transcript or "(not heard: no transcription model could hear it)"
            return ToolOutcome(f"{row.name} says:\n{words}", f"Read {row.name}'s words.")
        if row.content_type not in ("text/plain", "application/pdf"):
            return ToolOutcome(f"{row.name} is {row.content_type}, which has no text Hearth "
                               "reads.", f"Looked at {row.name}.")
        text, whole = await asyncio.to_thread(read_text, ctx.attachments_dir / row.sha256,
                                              row.content_type, offset + ctx.output_chars)
        part = text[offset:]
        more = "" if whole else f"\n[more follows: read on from offset {offset + len(part)}]"
        return ToolOutcome(part + more, f"Read {len(part):,} characters of {row.name}.")
