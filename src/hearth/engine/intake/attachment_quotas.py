"""The quotas an upload is held to, checked in the transaction that keeps its row (`check`), so
two uploads at once cannot both take the last room:

- the uploads one chat holds not sent yet (`[attachments] held_per_chat`): one more is 429
  `too_many_held`, with `Retry-After` until the oldest of them is removed
  (`engine.background.held_uploads`, after `held_seconds`);
- the bytes of every file one chat keeps, sent and held (`[attachments] chat_max_mb`): 413
  `chat_files_full`;
- the bytes of every file in the chats one app started (`[apps] attachments_mb`): 429
  `quota_exceeded`, as the app's other quotas are.

The owner's uploads are held to the chat's quotas alone. Each refusal names the quota, its
value and the key that raises it, and says that nothing of the file was kept.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from sqlalchemy import Connection

from hearth.config import AppsConfig, AttachmentsConfig
from hearth.errors import Limited, Refusal
from hearth.store import attachments as attachment_store

NOTHING_KEPT = "Nothing of this file was kept."


@dataclass(frozen=True)
class Quotas:
    """The quotas in force for one upload (read from the settings as it starts)."""

    files: AttachmentsConfig
    apps: AppsConfig


def check(conn: Connection, quotas: Quotas, key: str, app: str | None, size: int) -> None:
    """Refuse a file of `size` bytes for the chat `key` (started by `app`, None: the owner)
    that would take the chat, or the app, past a quota."""
    use = attachment_store.usage(conn, key)
    files = quotas.files
    if use.held >= files.held_per_chat:
        raise _too_many_held(key, use.held, use.oldest_held, files)
    if use.size + size > files.chat_max_bytes:
        raise Refusal("chat_files_full", 413,
                      f"Chat {key!r} keeps {_mb(use.size)} of files; this one would take it "
                      f"past its quota (`chat_max_mb` = {files.chat_max_mb:g} under "
                      "[attachments] in config.toml). Start another chat for more files, or "
                      f"raise `chat_max_mb`. {NOTHING_KEPT}")
    if app is None:
        return
    taken = attachment_store.size_of_app(conn, app)
    if taken + size > quotas.apps.attachments_bytes:
        raise Refusal("quota_exceeded", 429,
                      f"The app {app!r}'s chats keep {_mb(taken)} of files; this one would "
                      f"take them past its quota (`attachments_mb` = "
                      f"{quotas.apps.attachments_mb:g} under [apps] in config.toml). Delete "
                      f"one of its chats, or ask the owner to raise `attachments_mb`. "
                      f"{NOTHING_KEPT}")


def _too_many_held(key: str, held: int, oldest: float | None,
                   files: AttachmentsConfig) -> Limited:
    wait = max(1, math.ceil((oldest or time.time()) + files.held_seconds - time.time()))
    return Limited("too_many_held", 429,
                   f"Chat {key!r} holds {held} uploads not sent yet, its quota "
                   f"(`held_per_chat` = {files.held_per_chat} under [attachments] in "
                   "config.toml); send them with a message first, or wait: an upload never "
                   f"sent is removed after {_duration(files.held_seconds)}. {NOTHING_KEPT}",
                   wait)


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    return f"{seconds:g} seconds"
