"""The channels of one gateway: started and stopped with it, and the bridge between each
adapter and the engine.

It owns three things:
- **Taking in.** An adapter hands each message to `receive`: a reply word from the owner
  answers the thread's waiting approval; anything else is admitted through the engine
  (`engine.intake.channel_inbound`), once, with the channel's cursor.
- **Delivery.** It hears every frame of the live bus (`Bus.tap`). When a linked chat says
  something (an answer, a notice) or asks an approval, the engine's ledger records what is
  owed to the thread (`engine.delivery.channel_delivery`), and the channel's sender sends it:
  one task per thread sends that thread's messages in order, threads in parallel. A send the channel
  never took is tried again with a growing pause; one it refused is recorded failed and said
  in the chat; one that may have arrived is never sent again blindly. At start the sends a
  crash interrupted are settled first, then whatever is owed is sent. The owner's Retry on
  the delivery desk (`send_again`) owes a failed or unknown one again and wakes its sender:
  with several gateways, the channels run on the leader, and another's Retry (or a chat moved
  there) wakes the leader's sender through the relay (`deliver`).
- **Typing.** While a linked chat's turn runs, its thread shows that an answer is coming.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from hearth.channels import chunking
from hearth.channels.base import (
    APPROVAL_BUTTONS,
    REPLY_WORDS,
    Answering,
    Channel,
    NotSent,
    Outbound,
    Refused,
    SendError,
    Sent,
    Unsure,
)
from hearth.engine.delivery import channel_delivery
from hearth.engine.intake import channel_inbound
from hearth.engine.intake.channel_inbound import Inbound, Received
from hearth.errors import Refusal
from hearth.faults import crash_point
from hearth.tasks import cancel_and_wait

if TYPE_CHECKING:
    from hearth.engine.delivery.channel_delivery import Delivery
    from hearth.engine.runtime import Engine

log = logging.getLogger(__name__)

SEND_ATTEMPTS = 8  # a message the channel never took is tried this often, then failed
PAUSE_MAX = 60.0  # seconds between tries, at most
TYPING_EVERY = 4.5  # Telegram shows "typing" for 5 seconds
SAID = ("assistant", "notice")
MOVED_NOTE = "This chat continues on {where} now. Messages here no longer reach it."
OPENED_NOTE = ("“{title}” continues here.\n\nReply to this mail to talk to your agent; its "
               "answers come back in this conversation.")
ANSWERED = {"allow_once": "Allowed once.", "allow_always": "Allowed from now on.",
            "deny": "Denied."}


class Channels:
    def __init__(self, engine: Engine, adapters: list[Channel]) -> None:
        self.engine = engine
        self.adapters = {adapter.name: adapter for adapter in adapters}
        self._kicks = {name: asyncio.Event() for name in self.adapters}
        self._busy: set[tuple[str, str]] = set()  # (channel, thread) a sender task serves
        self._typing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False

    def health(self) -> dict[str, dict[str, str]]:
        return {name: {"state": a.health.state, "sentence": a.health.sentence,
                       **a.health.detail} for name, a in self.adapters.items()}

    async def start(self) -> None:
        """Settle interrupted sends, owe what linked chats said while the gateway was down,
        start the senders, then the adapters (which catch up on what arrived meanwhile)."""
        if not self.adapters:
            return
        for adapter in self.adapters.values():
            found = await channel_delivery.interrupted(self.engine, adapter.name,
                                                       adapter.resend_is_safe)
            if found:
                log.info("%s: %d send(s) interrupted by the last stop", adapter.name, found)
        self.engine.bus.tap(self._heard)
        if self.engine.relay is not None:  # another replica's Retry or move wakes a sender here
            self.engine.relay.ops["deliver"] = self._kick
        self._started = True
        for key in await channel_delivery.linked_chats(self.engine):
            await self._owe(key)
        for adapter in self.adapters.values():
            self._spawn(self._sender(adapter), f"channel:{adapter.name}:sender")
            self._kicks[adapter.name].set()
            await adapter.start(self)

    async def stop_receiving(self) -> None:
        for adapter in self.adapters.values():
            await adapter.stop()

    async def stop(self) -> None:
        """Stop the adapters and every task; what is still owed is sent at the next start."""
        self._started = False
        await self.stop_receiving()
        await cancel_and_wait(*self._tasks)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- taking in (the adapters' Desk) ----------------------------------------------------

    async def receive(self, inbound: Inbound) -> Received | None:
        decision = REPLY_WORDS.get(inbound.text.strip().lower().rstrip(".!"))
        if decision is not None and inbound.owner and not inbound.attachments:
            answered = await self._reply_word(inbound, decision)
            if answered:
                return None
        return await channel_inbound.receive(self.engine, inbound)

    async def _reply_word(self, inbound: Inbound, decision: str) -> bool:
        """The owner's "yes"/"no" answers the oldest approval waiting in the thread's chat,
        else the oldest asked in this thread (a guest's, asked in the owner's own thread)."""
        key = await channel_inbound.thread_chat(self.engine, inbound.channel, inbound.thread)
        waiting = await channel_delivery.pending_approvals(self.engine, key) if key else []
        if not waiting:
            waiting = await channel_delivery.asked_in(self.engine, inbound.channel,
                                                      inbound.thread)
        if not waiting:
            return False
        if await channel_inbound.take_only(self.engine, inbound):
            with contextlib.suppress(Refusal):
                await self.engine.desk.decide(waiting[0], decision, None)
        return True

    async def answer(self, channel: str, approval_id: str, decision: str, sender: str,
                     owner: bool) -> str:
        """A button pressed on an approval: the sentence to show whoever pressed it."""
        if not owner:
            return "Only the owner can answer this."
        if not await channel_delivery.asked_on(self.engine, approval_id, channel):
            return "This approval was not asked here, so it cannot be answered here."
        try:
            await self.engine.desk.decide(approval_id, decision, None)
        except Refusal as refusal:
            return refusal.sentence
        return ANSWERED.get(decision, "Answered.")

    async def skip(self, channel: str, cursor: int, token: str | None = None) -> None:
        await channel_inbound.skip(self.engine, channel, cursor, token)

    async def cursor(self, channel: str) -> int | None:
        return await channel_inbound.cursor_of(self.engine, channel)

    async def cursor_token(self, channel: str) -> tuple[int | None, str | None]:
        return await channel_inbound.cursor_token_of(self.engine, channel)

    async def owner_dms(self, channel: str) -> list[str]:
        return await channel_inbound.owner_dms(self.engine, channel)

    async def answering(self, channel: str, out: Outbound) -> Answering:
        title, kept = await channel_inbound.answering(self.engine, out.chat, channel, out.thread)
        return Answering(title, kept)

    async def sent_as(self, channel: str, message_id: str) -> Sent | None:
        row = await channel_delivery.sent_as(self.engine, channel, message_id)
        return None if row is None else Sent(row.thread, row.kind, row.approval_id)

    # -- where a chat answers (the dashboard's "Continue on") -----------------------------

    async def continue_on(self, session_key: str, name: str) -> channel_delivery.Moved:
        """Move the chat to the owner's own direct chat on channel `name`; the owner's chat it
        left hears once where it went. A channel where the gateway opens a conversation of its
        own (`opens_conversations`: email) is sent its first message, the chat's title."""
        adapter = self.adapters.get(name)
        if adapter is None:
            raise Refusal("unknown_channel", 422,
                          f"There is no channel {name!r}; set up: "
                          f"{', '.join(self.adapters) or 'none'}.")
        thread = adapter.owner_thread()
        if thread is None:
            raise Refusal("no_owner_thread", 409,
                          f"{name.title()} does not know the owner's own chat: set "
                          f"{getattr(adapter, 'owner_setting', 'owner_ids')} in "
                          f"[channels.{name}] in config.toml.")
        await self._restricted_stays(session_key)
        opens = getattr(adapter, "opens_conversations", False)
        if opens:  # each continue would open another conversation: where it is, it stays
            here = await channel_delivery.link_of(self.engine, session_key)
            if here is not None and here.channel == name and here.owner_dm:
                return channel_delivery.Moved(here, None, None)
        moved = await channel_delivery.continue_on(
            self.engine, session_key, name, thread, True, MOVED_NOTE.format(where=name.title()),
            opening=OPENED_NOTE if opens else None)
        self._kick_left(moved.left)
        if opens:
            self._wake(name)
        return moved

    async def answer_here(self, session_key: str) -> None:
        """The chat answers on no channel any more (the dashboard and the API only)."""
        left = await channel_delivery.unlink(self.engine, session_key, MOVED_NOTE.format(
            where="the dashboard"))
        self._kick_left(left)

    # -- the delivery desk's Retry ----------------------------------------------------------

    async def send_again(self, delivery_id: int) -> Delivery:
        """The owner's Retry of a failed or unknown delivery: owed once more, then sent by
        the channel's own sender, as any due row (the row as it was before)."""
        row = await self.engine.delivery_desk.send_again(delivery_id, self.adapters)
        self._wake(row.channel)
        return row

    def _kick_left(self, left: channel_delivery.Link | None) -> None:
        if left is not None:
            self._wake(left.channel)

    def _wake(self, channel: str) -> None:
        """Wake the channel's sender for rows owed here and now: this gateway's, when it runs
        the channels (it leads), else the leader's, told through the relay."""
        if self._started:
            self._kick(channel)
        elif self.engine.relay is not None:
            self.engine.relay.tell("deliver", channel)

    def _kick(self, channel: str) -> None:
        if channel in self._kicks:
            self._kicks[channel].set()

    async def _restricted_stays(self, session_key: str) -> None:
        if not await channel_delivery.may_link(self.engine, session_key):
            raise Refusal("restricted_chat", 409,
                          "An Incognito or Temporary chat answers only where it was opened: "
                          "it is not continued on a channel.")

    # -- hearing the bus -----------------------------------------------------------------

    def _heard(self, session_key: str, frame: dict[str, Any]) -> None:
        if not self._started:
            return
        kind = frame.get("type")
        if kind == "message":
            role = frame.get("message", {}).get("kind")
            if role in SAID:
                self._spawn(self._owe(session_key), f"channel:owe:{session_key}")
            elif role == "user" and session_key not in self._typing:
                self._typing.add(session_key)
                self._spawn(self._type(session_key), f"channel:typing:{session_key}")
        elif kind == "approval" and frame.get("approval", {}).get("status") == "pending":
            self._spawn(self._ask(frame["approval"]), f"channel:ask:{session_key}")
        elif kind == "done":
            self._spawn(self._owe(session_key), f"channel:owe:{session_key}")

    async def _owe(self, session_key: str) -> None:
        link = await channel_delivery.link_of(self.engine, session_key)
        adapter = self.adapters.get(link.channel) if link is not None else None
        if adapter is None:
            return
        def parts(text: str) -> list[str]:
            return chunking.split(text, adapter.max_chars, adapter.measure)
        owed = await channel_delivery.owe_said(self.engine, session_key, parts)
        if owed:
            self._serve(adapter, owed[0].thread)

    async def _ask(self, approval: dict[str, Any]) -> None:
        tool, target = approval.get("tool", "a tool"), approval.get("target")
        asker = approval.get("asked_by")
        text = f"Approval needed: {tool}" + (f"\n{target}" if target else "")
        if asker:  # asked of the owner in the owner's own thread, not where the guest is
            text = f"Approval needed for {asker} (in another chat): {tool}" + (
                f"\n{target}" if target else "")
        text += "\nAnswer with a button, or reply yes, always or no."
        rows = await channel_delivery.owe_approval(self.engine, str(approval["id"]), text[:3000],
                                                   self._owner_thread)
        if rows and rows[0].channel in self._kicks:
            self._kicks[rows[0].channel].set()

    def _owner_thread(self, channel: str) -> str | None:
        """The owner's own thread on `channel` (None: the channel knows none)."""
        adapter = self.adapters.get(channel)
        return adapter.owner_thread() if adapter is not None else None

    async def _type(self, session_key: str) -> None:
        try:
            link = await channel_delivery.link_of(self.engine, session_key)
            adapter = self.adapters.get(link.channel) if link is not None else None
            if link is None or adapter is None:
                return
            first = True
            while first or self._turn_in(session_key):
                first = False
                await adapter.typing(link.thread)
                await asyncio.sleep(TYPING_EVERY)
        finally:
            self._typing.discard(session_key)

    def _turn_in(self, session_key: str) -> bool:
        lanes = self.engine.lanes
        return self.engine.active.turn_of(session_key) is not None or (
            lanes is not None and lanes.busy(session_key))

    # -- sending -------------------------------------------------------------------------

    async def _sender(self, adapter: Channel) -> None:
        kick = self._kicks[adapter.name]
        while True:
            await kick.wait()
            kick.clear()
            for row in await channel_delivery.due(self.engine, adapter.name, 1000):
                self._serve(adapter, row.thread)

    def _serve(self, adapter: Channel, thread: str) -> None:
        """Make sure a task sends the thread's owed rows (one per thread: in order)."""
        place = (adapter.name, thread)
        if place not in self._busy:
            self._busy.add(place)
            self._spawn(self._send_thread(adapter, thread), f"channel:{adapter.name}:send")

    async def _send_thread(self, adapter: Channel, thread: str) -> None:
        try:
            while rows := await channel_delivery.due(self.engine, adapter.name, 50, thread):
                for row in rows:
                    if not await self._send_one(adapter, row):
                        break  # paused: read the thread's rows again
        finally:
            self._busy.discard((adapter.name, thread))
            self._kicks[adapter.name].set()  # anything owed meanwhile is seen

    async def _send_one(self, adapter: Channel, row: Delivery) -> bool:
        """Send one row; False when it must wait and be tried again."""
        await channel_delivery.attempting(self.engine, row.id)
        try:
            message_id = await adapter.send(_outbound(row))
        except NotSent as error:
            return await self._not_sent(row, str(error), error.retry_after)
        except Refused as error:
            await channel_delivery.failed(self.engine, row, str(error))
            return True
        except Unsure as error:
            return await self._unsure(adapter, row, str(error))
        crash_point("delivery_sent")
        await channel_delivery.sent(self.engine, row.id, message_id)
        return True

    async def _not_sent(self, row: Delivery, why: str, retry_after: float | None) -> bool:
        adapter = self.adapters.get(row.channel)
        attempts = int(getattr(adapter, "send_attempts", SEND_ATTEMPTS))
        if row.attempts + 1 >= attempts:
            await channel_delivery.failed(self.engine, row, f"{why}; tried {attempts} times")
            return True
        await channel_delivery.not_sent(self.engine, row.id, why)
        await asyncio.sleep(retry_after if retry_after is not None
                            else min(PAUSE_MAX, 0.5 * 2 ** row.attempts))
        return False

    async def _unsure(self, adapter: Channel, row: Delivery, why: str) -> bool:
        if adapter.resend_is_safe:  # the channel drops a second copy: send it again
            return await self._not_sent(row, why, None)
        await channel_delivery.unsure(self.engine, row, why)
        return True


def _outbound(row: Delivery) -> Outbound:
    buttons = APPROVAL_BUTTONS if row.kind == "approval" else ()
    return Outbound(delivery_id=row.id, thread=row.thread, text=row.text, kind=row.kind,
                    part=row.part, parts=row.parts, chat=row.session_key,
                    approval_id=row.approval_id, buttons=buttons)


__all__ = ["Channels", "SendError"]
