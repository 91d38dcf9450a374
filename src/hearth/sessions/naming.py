"""The one place a new chat is named: `chat-<number>-<second>`, and the one place a name a
client gives becomes a chat's key.

The number carries on past the highest one any kept chat has, and a name some chat already
holds (one named by hand, or made in the same second by a clock set back) is stepped past.

Names are per principal (`key_for`): the owner's names are the chats' keys; an app's live in
a namespace of its own, `<app>~<name>`, which no owner's name can spell (a name holds no
`~`). So an app's name never opens, collides with or reveals an owner's chat, and the owner's
work (a job's chat, `/v1`'s `user`) never opens an app's.

What a chat is called where it is shown (`shown_name`) is made here too: its title, else its
first words, else its name, never a made-up key.
"""

from __future__ import annotations

import re
import time

from sqlalchemy import Connection

from hearth.store import sessions as session_store

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
APP_MARK = "~"  # between an app's name and a name it gave: `zapier~inbox`
_CHAT_NAME = re.compile(r"^chat-(\d+)-(\d+)$")
OPENING_CHARS = 60  # an untitled chat is shown by this much of its first message
# Markdown's marks that are no words: a code fence (and its language), a heading's, quote's or
# list item's mark at a line's start
_MARKUP = re.compile(r"```[\w+-]*|^[ \t]*(?:#{1,6}|>|[-*+]|\d+[.)])[ \t]+", re.MULTILINE)


def namespace(app: str | None) -> str:
    """What the keys of `app`'s chats begin with (`<app>~`); nothing for the owner's."""
    return "" if app is None else app + APP_MARK


def key_for(name: str, app: str | None) -> str:
    """The key of the chat `name` names for whoever gives it: the owner's name itself; for
    an app, the name in its own namespace (a key it was handed back, `<app>~…`, is itself)."""
    prefix = namespace(app)
    return name if name.startswith(prefix) else prefix + name


def name_part(name: str, app: str | None) -> str:
    """What of `name` is the name itself, to check against `NAME_PATTERN` (an app may give
    back the key it was handed)."""
    return name.removeprefix(namespace(app))


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


def shown_name(title: str | None, opening: str | None, key: str) -> str:
    """What a chat is called where it is shown: its title, else its first words, else the name
    it was opened with, else "Chat N" (its number), never a made-up key: that is an address."""
    if title:
        return title
    words = " ".join(_MARKUP.sub(" ", opening or "").split())
    if words:
        return words if len(words) <= OPENING_CHARS else words[:OPENING_CHARS - 1].rstrip() + "…"
    number = chat_number_of(key)
    return key if number is None else f"Chat {number}"
