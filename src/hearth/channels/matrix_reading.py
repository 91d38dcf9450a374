"""Reading one /sync batch for the Matrix channel: pure functions over its raw events.

Which events are messages to take (a text, notice or emote; not an edit of one, a redacted
one, one redacted in the same batch, nor the bot's own), whether a group room's message is for
the bot (it is mentioned in `m.mentions`, named in the text, or replied to), the words without
the bot's name, a reaction's approval decision, and Markdown as Matrix HTML. And what a room
is (`Room`): who can read it, from its state and each member event after it (Synapse sends no
summary unless members are lazy-loaded, so the counts are the summary's only when it comes),
and whether end-to-end encryption is on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt

Event = dict[str, Any]
TEXTS = ("m.text", "m.notice", "m.emote")
# a reaction on an approval's question: its decision
REACTIONS = {"👍": "allow_once", "👍️": "allow_once", "✅": "allow_always",
             "👎": "deny", "👎️": "deny"}
REACT_HINT = "React 👍 to allow once, ✅ to always allow, 👎 to deny, or reply yes, always or no."
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False})
READS = ("join", "invite")  # a member who can read the room (an invite may read its history)


@dataclass
class Room:
    """What the bot knows of one room: who can read it (joined or invited members, from the
    room's state and every member event since), the counts of the latest summary that gave
    them, and whether encryption is on (it cannot be turned off). A room the homeserver could
    not describe is not `known`: nobody is taken to be alone in it with the bot."""

    readers: set[str] = field(default_factory=set)
    joined: int | None = None
    invited: int | None = None
    encrypted: bool = False
    known: bool = True

    @classmethod
    def of_state(cls, events: Iterable[Event]) -> Room:
        """The room as its whole state says (`GET /rooms/{room}/state`)."""
        room = cls()
        for event in events:
            room.take(event)
        return room

    def take(self, event: Event) -> None:
        """A state or timeline event: a member joining, invited, leaving or banned, or
        encryption turned on; any other event changes nothing."""
        kind = event.get("type")
        if kind == "m.room.encryption":
            self.encrypted = True
            return
        user = event.get("state_key")
        if kind != "m.room.member" or not isinstance(user, str):
            return
        if (event.get("content") or {}).get("membership") in READS:
            self.readers.add(user)
        else:
            self.readers.discard(user)

    def count(self, joined: int | None, invited: int | None) -> None:
        """A summary's counts (a count it leaves out has not changed since the last)."""
        self.joined = self.joined if joined is None else joined
        self.invited = self.invited if invited is None else invited

    def shared_with(self, bot: str) -> str | None:
        """The one person the bot shares this room with; None when anyone else can read it
        too (a third member, joined or invited, by the members or by the summary's counts)."""
        others = self.readers - {bot}
        if not self.known or len(others) != 1 or (self.joined or 0) + (self.invited or 0) > 2:
            return None
        return next(iter(others))


def redacted_in(events: list[Event]) -> set[str]:
    """The event ids a batch's redactions take back."""
    found = set()
    for event in events:
        if event.get("type") == "m.room.redaction":
            target = event.get("redacts") or (event.get("content") or {}).get("redacts")
            if isinstance(target, str):
                found.add(target)
    return found


def is_edit(event: Event) -> bool:
    relates = (event.get("content") or {}).get("m.relates_to") or {}
    return isinstance(relates, dict) and relates.get("rel_type") == "m.replace"


def message_text(event: Event, taken_back: set[str]) -> str | None:
    """The words of a message to take, None for any other event."""
    content = event.get("content") or {}
    if event.get("type") != "m.room.message" or content.get("msgtype") not in TEXTS:
        return None
    if event.get("event_id") in taken_back or (event.get("unsigned") or {}).get(
            "redacted_because") or is_edit(event):
        return None
    body = content.get("body")
    return body if isinstance(body, str) else None


def replied_to(event: Event) -> str | None:
    relates = (event.get("content") or {}).get("m.relates_to") or {}
    reply = relates.get("m.in_reply_to") if isinstance(relates, dict) else None
    found = reply.get("event_id") if isinstance(reply, dict) else None
    return found if isinstance(found, str) else None


def addressed(event: Event, bot: str) -> bool:
    """A group room's message names the bot: it mentions it, or says its name (a reply to
    the bot's own message is for it too: `replied_to`, asked of the ledger)."""
    content = event.get("content") or {}
    mentions = content.get("m.mentions") or {}
    if isinstance(mentions, dict) and bot in (mentions.get("user_ids") or []):
        return True
    return _name_pattern(bot).search(str(content.get("body", ""))) is not None


def without_name(text: str, bot: str) -> str:
    """The words with the bot's name (its id, or `localpart:` at the start) left out, each
    line's spaces tidied and its line breaks kept."""
    text = _name_pattern(bot).sub("", text)
    lines = [" ".join(line.split()) for line in _without_reply_quote(text).splitlines()]
    return "\n".join(lines).strip().lstrip(":,").strip()


def _name_pattern(bot: str) -> re.Pattern[str]:
    local = bot[1:].split(":", 1)[0]
    return re.compile(rf"{re.escape(bot)}|^\s*@?{re.escape(local)}\b:?", re.I | re.M)


def _without_reply_quote(text: str) -> str:
    """A reply's fallback quote (`> <@x:y> …` lines at its top) left out."""
    lines = text.splitlines()
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines)


def reaction(event: Event) -> tuple[str, str] | None:
    """(the event reacted to, the decision) of an approval's reaction, else None."""
    if event.get("type") != "m.reaction":
        return None
    relates = (event.get("content") or {}).get("m.relates_to") or {}
    decision = REACTIONS.get(str(relates.get("key", "")))
    target = relates.get("event_id")
    if relates.get("rel_type") != "m.annotation" or decision is None or \
            not isinstance(target, str):
        return None
    return target, decision


def html_of(text: str) -> str:
    """Markdown as the HTML Matrix clients show (`org.matrix.custom.html`)."""
    return _markdown.render(text).strip()
