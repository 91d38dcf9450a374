"""The one place a new chat is named: `chat-<number>-<second>`.

The number carries on past the highest one any kept chat has, and a name some chat already
holds (one named by hand, or made in the same second by a clock set back) is stepped past.
"""

from __future__ import annotations

import re
import time

from sqlalchemy import Connection

from hearth.store import sessions as session_store

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_CHAT_NAME = re.compile(r"^chat-(\d+)-(\d+)$")


def chat_number_of(key: str) -> int | None:
    match = _CHAT_NAME.match(key)
    return int(match.group(1)) if match else None


def next_chat_name(conn: Connection, second: int | None = None) -> tuple[str, int]:
    """A name no chat holds, and its number. Call inside the transaction that inserts it."""
    stamp = int(time.time()) if second is None else second
    number = session_store.highest_chat_number(conn) + 1
    while session_store.exists(conn, f"chat-{number}-{stamp}"):
        number += 1
    return f"chat-{number}-{stamp}", number
