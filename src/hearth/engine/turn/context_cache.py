"""The hot context cache: each chat's recent context, kept decoded from one turn to the next.

What `engine.turn.context.build` reads of a chat (the summary in force, the opening it keeps
word for word, the newest `history_messages` events after the summary, the first events a
first compaction looks at) and what it folds them into (each exchange's model messages and
size, `Part`), kept per chat in `Recent`, so a turn reads only what was written since the
last one. Its one writer is the chat's own turn (the chat's lane, `sessions.lanes`, runs one
at a time); the doors that move a chat's head or end it drop its entry (`drop`).

A miss is always safe: an entry is used only while the store agrees with it. Before each turn
`refresh` reads the chat's stamp (`store.heads`): the same incarnation (generation, tab_id),
no new summary, and every event written since the entry's last seq on the head's path, each
the child of the one before, from the entry's head to the chat's head now, and both the
path's count (`message_count`) and the chat's count of events grown by exactly those (a
message moved by steering, an event taken off the path or deleted by any path breaks them).
Anything else reads the chat again, as a cold turn does, so a forgotten drop costs a re-read,
never a wrong view. Nothing of the transcript is ever changed in place but by those moves, so
events read once stay what the model reads.

Restricted chats (Incognito, Temporary) are never cached: their context is read each turn and
nothing of it is kept past it. `ContextCache(chats=0)` keeps nothing: every view is built as
without a cache. The cache is bounded: at most `CHATS` chats (the least recently
used goes first), an entry whose view passes `CHAT_CHARS` characters is not kept, and all of
them together hold at most `CHARS` characters of views; an entry holds at most the
`history_messages` newest events, the opening (at most `OPENING_READ`, twice) and the folded
exchanges of its last view.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection

from hearth.engine.turn.compaction.fold import Folded
from hearth.models.types import Message
from hearth.store import heads
from hearth.store.heads import Stamp
from hearth.store.transcript import EventRow

CHATS = 32  # chats kept, the least recently used dropped first
CHAT_CHARS = 2_000_000  # a chat whose view is longer (characters) is read each turn instead
CHARS = 16_000_000  # characters of views kept over all chats

PartKey = tuple[int, ...]  # the seqs of an exchange's events, in the order they are folded


@dataclass(frozen=True)
class Read:
    """The events a view is made of: the opening (when a summary follows it) and the tail."""

    head: list[EventRow]
    tail: list[EventRow]  # after the summary (or the whole chat), newest `history` events
    overflow: bool  # older events than the tail reaches, summarized by nothing


@dataclass(frozen=True)
class Part:
    """Events folded once: their model messages, those messages' size, and the call ids
    their calls and results carry (which tell whether parts can be folded apart)."""

    messages: tuple[Message, ...]
    size: int
    call_ids: frozenset[str]


class Memo:
    """Folded parts by their events' seqs; what the last view did not use is let go at the
    next (`rotate`)."""

    def __init__(self) -> None:
        self._used: dict[PartKey, Part] = {}
        self._older: dict[PartKey, Part] = {}

    def get(self, key: PartKey) -> Part | None:
        part = self._used.get(key)
        if part is None:
            part = self._older.pop(key, None)
            if part is not None:
                self._used[key] = part
        return part

    def put(self, key: PartKey, part: Part) -> None:
        self._used[key] = part

    def rotate(self) -> None:
        """A new view begins: the parts the last one used are kept until this one ends."""
        self._older = self._used
        self._used = {}

    def __len__(self) -> int:
        return len(self._used) + len(self._older)


@dataclass
class Recent:
    """One chat's recent context, as its store stood at `stamp`."""

    stamp: Stamp
    limit: int  # the history_messages it was read with
    folded: Folded | None
    read: Read
    opening: list[EventRow] | None = None  # events 1..OPENING_READ, when the chat had them all
    memo: Memo = field(default_factory=Memo)
    chars: int = 0  # the size of its last view, in characters

    def extended(self, now: Stamp, new: list[EventRow]) -> Recent:
        """The same context with the events appended since (all on the head's path)."""
        after = self.folded.through_seq if self.folded else 0
        tail = [*self.read.tail, *new][-self.limit:]
        overflow = bool(tail) and len(tail) >= self.limit and tail[0].seq > after + 1
        return Recent(now, self.limit, self.folded, Read(self.read.head, tail, overflow),
                      self.opening, self.memo, self.chars)


Fresh = Callable[[Connection, str, int], tuple[Folded | None, Read]]


def refresh(conn: Connection, key: str, have: Recent | None, limit: int,
            fresh: Fresh) -> Recent | None:
    """The chat's recent context now: `have` with what was appended since when the store
    agrees with it, else read again by `fresh` (None: the chat is gone). One read
    transaction, so the stamp and the events are of one moment."""
    now = heads.stamp(conn, key)
    if now is None:
        return None
    if have is not None and have.limit == limit and have.stamp.same_chat(now):
        extended = _appended(conn, key, have, now)
        if extended is not None:
            return extended
    folded, read = fresh(conn, key, limit)
    return Recent(now, limit, folded, read)


def _appended(conn: Connection, key: str, have: Recent, now: Stamp) -> Recent | None:
    """`have` and the events appended since, when only appends happened; else None."""
    was = have.stamp
    if now.last_seq == was.last_seq:
        same = (now.head_event_id, now.message_count, now.events) == (
            was.head_event_id, was.message_count, was.events)
        return have if same else None
    new = heads.since(conn, key, was.last_seq)
    head = was.head_event_id
    for event, off_path in new:
        if off_path or event.parent_event_id != head:
            return None
        head = event.event_id
    grown = (now.message_count - was.message_count, now.events - was.events)
    if head != now.head_event_id or grown != (len(new), len(new)):
        return None
    return have.extended(now, [event for event, _ in new])


class ContextCache:
    """The recent context of the chats that ran lately, least recently used first."""

    def __init__(self, chats: int = CHATS, chars: int = CHARS,
                 chat_chars: int = CHAT_CHARS) -> None:
        self.chats = chats
        self.chars = chars
        self.chat_chars = chat_chars
        self._entries: OrderedDict[str, Recent] = OrderedDict()
        self.hits = 0  # views built from an entry (and what was written since)
        self.misses = 0  # views of a kept chat read from the store whole

    def counted(self, *, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1

    def get(self, key: str) -> Recent | None:
        return self._entries.get(key)

    def put(self, key: str, recent: Recent) -> None:
        """Keep `recent` as the chat's (unless its view is too long), within the bounds."""
        self._entries.pop(key, None)
        if recent.chars > self.chat_chars:
            return
        self._entries[key] = recent
        while len(self._entries) > self.chats or (
                len(self._entries) > 1 and self.held_chars() > self.chars):
            self._entries.popitem(last=False)

    def drop(self, key: str) -> None:
        """Forget the chat's entry (its head moved, it was compacted, it ended)."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def held_chars(self) -> int:
        return sum(entry.chars for entry in self._entries.values())

    def keys(self) -> list[str]:
        """The chats held, least recently used first."""
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
