"""The store's row types the surfaces read (and never write), named here so that a surface
needs nothing of `hearth.store`: a memory item, a chat's row, and the name of the kind that
marks a memory document."""

from __future__ import annotations

from hearth.store.memory import DOCUMENT, MemoryItem
from hearth.store.sessions import SessionRow

__all__ = ["DOCUMENT", "MemoryItem", "SessionRow"]
