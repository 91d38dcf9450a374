"""Editing what memory holds: an item's kind and/or words, as the owner (or a chat's work)
revises them.

Checked as teaching is (a kind memory knows; words that are not blank, at most 2,000
characters once trimmed) and refused as teaching is for work that keeps nothing. Words that
are already another item's are refused (409 `memory_duplicate`, naming it): an item is kept
once, and two are never merged behind the owner's back. New words are no one chat's alone
unless the chat revising them is the one the item is filed under, so deleting that chat
leaves the owner's words (as a fact edited in Memory stays). The old words leave everything
that kept them: the keyword index, the day's history line (replaced by one for the new words)
and the write-ahead log.
"""

from __future__ import annotations

import asyncio

from hearth.errors import Refusal
from hearth.memory.service import Memory
from hearth.privacy import reach
from hearth.store import memory as store
from hearth.store.memory import KINDS, MemoryItem

MAX_TEXT = 2000  # characters of an item's words (as the memory API teaches them)


async def revise_memory(memory: Memory, item_id: int, *, kind: str | None = None,
                        text: str | None = None, filed_under: str | None = None) -> MemoryItem:
    """Change item `item_id`'s kind and/or words, as the work running now (the owner's, or
    with `filed_under` a chat's); the item as it now is. 404 `memory_not_found`, 409
    `memory_duplicate`, 422 for a kind or words memory does not take, 403 for work that
    keeps nothing."""
    words = _checked(kind, text)
    refusal = reach.write_refusal("nothing in memory was changed")
    if refusal is not None:
        raise reach.RestrictedSession(refusal)
    revised = await memory.db.writing(store.revise, item_id, kind=kind, words=words,
                                      filed_under=filed_under)
    if revised.item is None:
        raise Refusal("memory_not_found", 404, f"There is no memory item {item_id}.")
    if revised.duplicate_of is not None:
        raise Refusal("memory_duplicate", 409,
                      f"Memory already keeps these words as item {revised.duplicate_of}; "
                      "change that one, or forget one of them.",
                      details={"duplicate_of": revised.duplicate_of})
    if revised.changed:
        await asyncio.to_thread(_rewrite_history, memory, revised.item, revised.text_changed)
    return revised.item


def _checked(kind: str | None, text: str | None) -> str | None:
    """The new words, trimmed (None: unchanged); 422 for what memory does not take."""
    if kind is None and text is None:
        raise Refusal("invalid_request", 422, "Send a kind or a text to change.")
    if kind is not None and kind not in KINDS:
        raise Refusal("invalid_kind", 422, f"kind must be one of {', '.join(KINDS)}.")
    if text is None:
        return None
    words = text.strip()
    try:
        words.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Refusal("invalid_text", 422, "The words hold characters that are not valid "
                                           "Unicode text (a lone surrogate).") from exc
    if not words or len(words) > MAX_TEXT:
        raise Refusal("invalid_text", 422,
                      f"An item's words are 1 to {MAX_TEXT:,} characters once trimmed; these "
                      f"are {len(words):,}.")
    return words


def _rewrite_history(memory: Memory, item: MemoryItem, text_changed: bool) -> None:
    """The day's history says the item as it now is; with new words, no old frame of the
    log keeps the old ones (a thread: files and a checkpoint)."""
    memory.documents.cut_history([item.id])
    memory.documents.append_history(item.id, item.kind, item.text)
    if text_changed:
        memory.db.truncate_wal()
