"""The delivery desk: what the gateway owes and could not settle on its own, for the owner to
settle by hand. `DeliveryDesk` is made once by the engine (`engine.delivery_desk`), every
method awaited on the store's seam.

It lists the deliveries that `failed` (the channel refused them, or never took them after
every try) or whose outcome is `unknown` (the send was cut off: it may have arrived), and the
owed chores (titles, learning, summaries no model could do). A delivery may be sent again
(`send_again`: owed once more, so the channel's own sender sends it as any due row: one
sender per thread, never beside the channel's retry loop, which never touches a failed or
unknown row), marked delivered (`sent`, with a note) or dropped; an owed chore made due now
(the chore loop woken) or dropped. Each action is one conditional write with its audit row
(ids, channel, state: never the message's text), so of two at once one takes and the other is
refused with a sentence: a delivery being sent again cannot be sent again until it settles.

What needs the owner (the sidebar's count, `needs_owner`): every failed or unknown delivery,
and the owed chores tried `CHORE_NEEDS_OWNER` times or more (fewer tries are the chore loop's
own business: it retries with a growing pause and gives up by itself).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection

from hearth.errors import Refusal
from hearth.sessions.naming import shown_name
from hearth.store import (
    audit,
    deliveries,
    owed_chores,
    sessions as session_store,
    transcript,
)
from hearth.store.db import Database
from hearth.store.deliveries import DeliveryRow, Settled
from hearth.store.owed_chores import OwedRow

CHORE_NEEDS_OWNER = 3  # an owed chore counts toward the sidebar's badge from this many tries
LIST_LIMIT = 200  # rows of each list the desk shows, at most
PREVIEW = 160  # characters of a delivery's text the desk shows
MARKED = "Marked delivered by the owner (it was {status})."


class ChoreLoop(Protocol):
    """What the desk uses of the engine's chores: is one running, and wake the loop."""

    def running(self, kind: str, key: str) -> bool: ...

    def wake(self) -> None: ...


@dataclass(frozen=True)
class DeskDelivery:
    """A failed or unknown delivery as the desk shows it."""

    row: DeliveryRow
    at: float  # when it failed (or was found unknown)
    chat: str | None  # the chat's name; None when it is gone

    @property
    def preview(self) -> str:
        text = " ".join(self.row.text.split())
        return text if len(text) <= PREVIEW else text[:PREVIEW - 1] + "…"


@dataclass(frozen=True)
class DeskChore:
    """An owed chore as the desk shows it."""

    row: OwedRow
    chat: str | None
    running: bool  # being tried right now

    @property
    def needs_owner(self) -> bool:
        return self.row.attempts >= CHORE_NEEDS_OWNER


@dataclass(frozen=True)
class Listing:
    deliveries: list[DeskDelivery]
    chores: list[DeskChore]

    @property
    def needs_owner(self) -> int:
        return len(self.deliveries) + sum(c.needs_owner for c in self.chores)


def needs_owner(conn: Connection) -> int:
    """The sidebar's count: failed or unknown deliveries, and chores tried often."""
    return (deliveries.count_needing_owner(conn)
            + owed_chores.count_tried(conn, CHORE_NEEDS_OWNER))


class DeliveryDesk:
    """List what the gateway could not deliver or do, and settle it by hand."""

    def __init__(self, db: Database, chores: ChoreLoop) -> None:
        self._db = db
        self._chores = chores

    async def listing(self) -> Listing:
        found, owed, names = await self._db.reading(_listing)
        return Listing(
            [DeskDelivery(row, at, names.get(row.session_key)) for row, at in found],
            [DeskChore(row, names.get(row.session_key),
                       self._chores.running(row.kind, row.session_key)) for row in owed])

    # -- deliveries ----------------------------------------------------------------------------

    async def send_again(self, delivery_id: int, channels: Collection[str]) -> DeliveryRow:
        """Owe the failed or unknown delivery once more (the caller wakes its channel's
        sender); refused on a channel not set up here (`channels`: those that are)."""
        return await self._db.writing(_send_again, delivery_id, frozenset(channels))

    async def mark_delivered(self, delivery_id: int) -> DeliveryRow:
        return await self._db.writing(_mark_delivered, delivery_id)

    async def drop(self, delivery_id: int) -> DeliveryRow:
        return await self._db.writing(_drop, delivery_id)

    # -- owed chores ---------------------------------------------------------------------------

    async def chore_now(self, chore_id: int) -> OwedRow:
        """Make the owed chore due now and wake the chore loop, which tries it once."""
        row = await self._owed(chore_id)
        if not await self._db.writing(_chore_now, row, time.time()):
            raise Refusal("chore_due", 409,
                          f"Chore #{chore_id} is due now already: the gateway tries it at its "
                          "next pass, as soon as a model can be called.")
        self._chores.wake()
        return row

    async def drop_chore(self, chore_id: int) -> OwedRow:
        """Give the owed chore up: it is never tried again."""
        row = await self._owed(chore_id)
        if not await self._db.writing(_drop_chore, row):
            raise _no_chore(chore_id)
        return row

    async def _owed(self, chore_id: int) -> OwedRow:
        """The owed chore, refused when it is gone or being tried right now."""
        row = await self._db.reading(owed_chores.get, chore_id)
        if row is None:
            raise _no_chore(chore_id)
        if self._chores.running(row.kind, row.session_key):
            raise Refusal("chore_running", 409,
                          f"Chore #{chore_id} is being tried right now; wait until this try "
                          "ends (it is done, or owed again).")
        return row


def _listing(conn: Connection) -> tuple[list[tuple[DeliveryRow, float]], list[OwedRow],
                                        dict[str, str]]:
    found = deliveries.needing_owner(conn, LIST_LIMIT)
    owed = owed_chores.listing(conn, LIST_LIMIT)
    keys = {row.session_key for row, _ in found} | {row.session_key for row in owed}
    return found, owed, _names(conn, keys)


def _names(conn: Connection, keys: set[str]) -> dict[str, str]:
    """What each chat is called (its title, else its first words); a chat gone is left out."""
    chats = {key: session_store.get(conn, key) for key in sorted(keys)}
    kept = {key: chat for key, chat in chats.items() if chat is not None}
    openings = transcript.openings(conn, [k for k, c in kept.items() if not c.title])
    return {key: shown_name(chat.title, openings.get(key), key) for key, chat in kept.items()}


def _settled(settled: Settled, delivery_id: int) -> DeliveryRow:
    """The row as it was, when the action took; else the sentence saying why not."""
    before = settled.before
    if before is None:
        raise Refusal("delivery_not_found", 404, f"There is no delivery #{delivery_id}.")
    if settled.took:
        return before
    if before.status == "created":
        raise Refusal("delivery_pending", 409,
                      f"Delivery #{delivery_id} is being sent now; wait until it settles "
                      "(delivered, or failed again) before doing anything else to it.")
    done = "was delivered" if before.status == "sent" else "was dropped"
    raise Refusal("delivery_settled", 409,
                  f"Delivery #{delivery_id} {done} already: there is nothing left to do.")


def _noted(conn: Connection, action: str, row: DeliveryRow) -> None:
    audit.write(conn, action, actor="owner", session_key=row.session_key,
                detail={"delivery_id": row.id, "channel": row.channel, "thread": row.thread,
                        "was": row.status, "attempts": row.attempts})


def _send_again(conn: Connection, delivery_id: int, channels: frozenset[str]) -> DeliveryRow:
    row = deliveries.get(conn, delivery_id)
    if row is not None and row.status in deliveries.NEEDS_OWNER and row.channel not in channels:
        raise Refusal("channel_not_set_up", 409,
                      f"The {row.channel} channel is not set up on this gateway, so delivery "
                      f"#{delivery_id} cannot be sent again: set it up, or drop it.")
    row = _settled(deliveries.send_again(conn, delivery_id), delivery_id)
    _noted(conn, "delivery.retried", row)
    return row


def _mark_delivered(conn: Connection, delivery_id: int) -> DeliveryRow:
    before = deliveries.get(conn, delivery_id)
    note = MARKED.format(status=before.status if before is not None else "gone")
    row = _settled(deliveries.marked_sent(conn, delivery_id, note), delivery_id)
    _noted(conn, "delivery.marked_delivered", row)
    return row


def _drop(conn: Connection, delivery_id: int) -> DeliveryRow:
    row = _settled(deliveries.dropped(conn, delivery_id), delivery_id)
    _noted(conn, "delivery.dropped", row)
    return row


def _chore_noted(conn: Connection, action: str, row: OwedRow) -> None:
    audit.write(conn, action, actor="owner", session_key=row.session_key, run_id=row.run_id,
                detail={"chore_id": row.id, "kind": row.kind, "attempts": row.attempts})


def _chore_now(conn: Connection, row: OwedRow, at: float) -> bool:
    if owed_chores.get(conn, row.id) is None:
        raise _no_chore(row.id)
    if not owed_chores.due_now(conn, row.id, at):
        return False
    _chore_noted(conn, "chore.retried", row)
    return True


def _drop_chore(conn: Connection, row: OwedRow) -> bool:
    if not owed_chores.settle(conn, row.id):
        return False
    _chore_noted(conn, "chore.dropped", row)
    return True


def _no_chore(chore_id: int) -> Refusal:
    return Refusal("chore_not_found", 404,
                   f"There is no owed chore #{chore_id}: it was done, or given up.")
