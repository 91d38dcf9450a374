"""The Matrix channel: a bot account on a homeserver, on matrix-nio's AsyncClient.

Why matrix-nio: it is the kept asyncio client (mautrix's bridge framework is more than a bot
needs), it validates every /sync answer against the spec's schema, and its end-to-end
encryption is optional, so the gateway runs without libolm.

Taking in is Hearth's own /sync loop. Each batch's messages are admitted in order, and the
batch's `next_batch` is committed with the last one's admission (or, when none of them is
admitted, alone after them): a restart syncs from what was committed, so what came while the
gateway was down is read, and each event id, recorded with its admission, is admitted once.
The first start reads nothing old: it begins at the homeserver's present. A room of two (the
bot and one person) is a direct chat, answered always; in a bigger room the bot answers when
mentioned (`m.mentions`, its name) or replied to (the delivery ledger says which events are
the bot's, so a reply or a reaction to one sent before a restart still counts). Who can read
a room (its joined and invited members) is its state, asked of the homeserver when the room is
first met, followed by every member event each sync brings, and held to the summary's counts
when one comes (Synapse sends none unless members are lazy-loaded): a third member makes a
room a group room at once, and the owner's direct room (where "Continue on Matrix" moves a
chat) is only one the bot shares with one owner alone. Edits of a message are not taken as new
ones, and a message redacted before it was read is not taken at all. Invites are joined.

End-to-end encrypted rooms are refused: the bot cannot read them (no crypto store is kept), so
nothing said in one is taken, and the room is told so once, in a fixed notice, rather than
left silent. Nothing else is ever sent into one: before each send the homeserver is asked
whether the room is encrypted (encryption turned on since the last sync counts), and a message
for an encrypted room is refused, so its delivery ends failed, saying why.

Out: each message is sent with a transaction id made of its delivery id, so a send repeated
after a crash is the same event (`resend_is_safe`); Markdown goes as Matrix HTML. Approvals are
answered by a reaction on the question (👍 ✅ 👎) or a reply word, an owner's only. Typing is
shown while a turn runs. The poller's pause doubles (to five minutes) and starts over only when
a /sync succeeds; sending never waits on the poller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    RoomGetStateEventResponse,
    RoomGetStateResponse,
    RoomSendResponse,
    SyncResponse,
)

from hearth import masking
from hearth.channels import matrix_reading as reading
from hearth.channels.base import (
    Desk,
    Health,
    NotSent,
    Outbound,
    Refused,
    SendError,
    Sent,
    remember,
)
from hearth.config import MatrixConfig
from hearth.engine.intake.channel_inbound import Inbound
from hearth.errors import Refusal
from hearth.tasks import cancel_and_wait

log = logging.getLogger(__name__)

NAME = "matrix"
PAUSE_MAX = 300.0
NETWORK = (OSError, TimeoutError, aiohttp.ClientError)  # the homeserver could not be reached
REFUSED = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_NOT_JSON", "M_TOO_LARGE",
                     "M_INVALID_PARAM"})
ENCRYPTED = ("This room is end-to-end encrypted, and Hearth reads only unencrypted rooms: "
             "nothing said here reaches it. Talk to it in a room without encryption.")
NO_PLAINTEXT = ("the room is end-to-end encrypted, and Hearth sends nothing into one in plain "
                "text; continue the chat in a room without encryption")
ROOMS_KEPT = 10_000  # rooms known at once; one let go is asked of the homeserver again


class SyncFailed(Exception):
    """/sync did not answer; the message says why (never the token)."""


class MatrixChannel:
    name = NAME
    resend_is_safe = True  # one transaction id per delivery: the homeserver keeps it once
    continue_hint = ("Write to the bot in your direct room first: Matrix says which room is "
                     "yours only then, and chats can be continued there from that moment on "
                     "(across restarts too).")

    def __init__(self, config: MatrixConfig) -> None:
        self.config = config
        self.max_chars = config.max_chars
        self.measure: Callable[[str], int] = len
        self.health = Health()
        self._token = config.resolved_token()
        masking.know(self._token)
        self._desk: Desk | None = None
        self._client: Any = None  # nio.AsyncClient
        self._task: asyncio.Task[None] | None = None
        self._pause = 1.0
        self._rooms: dict[str, reading.Room] = {}  # who can read each room, and encryption
        self._told: set[str] = set()  # encrypted rooms told they are not read
        self._owner_room: str | None = None  # the owner's direct room, once they wrote in it

    # -- the protocol --------------------------------------------------------------------

    async def start(self, desk: Desk) -> None:
        self._desk = desk
        if not self._token:
            self.health = Health("error", "No access token: set MATRIX_ACCESS_TOKEN (or "
                                 "access_token_env / access_token in [channels.matrix]) and "
                                 "restart.")
            return
        self._client = AsyncClient(
            self.config.homeserver.rstrip("/"), self.config.user_id, device_id="HEARTH",
            store_path="", config=AsyncClientConfig(encryption_enabled=False,
                                                    max_limit_exceeded=0, max_timeouts=0,
                                                    request_timeout=self.config
                                                    .poll_timeout_seconds + 30))
        self._client.access_token = self._token
        self._client.user_id = self.config.user_id  # known without a login or whoami
        self._task = asyncio.create_task(self._run(), name="channel:matrix:sync")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def owner_thread(self) -> str | None:
        """The owner's direct room with the bot, once they wrote in it (the bot cannot tell
        which room of two is theirs before); after a restart the one linked as theirs
        (`_recall_owner_room`). None whenever anyone else can read it (a third member, joined
        or invited) or it is encrypted: a chat is never moved where someone else reads it."""
        room = self._rooms.get(self._owner_room) if self._owner_room else None
        return self._owner_room if room is not None and self._owners_alone(room) else None

    def _owners_alone(self, room: reading.Room) -> bool:
        """The bot shares `room` with one owner and nobody else, unencrypted."""
        return not room.encrypted and room.shared_with(self.config.user_id) in \
            self.config.owner_ids

    async def typing(self, thread: str) -> None:
        room = self._rooms.get(thread)
        if self._client is None or (room is not None and room.encrypted):
            return
        with contextlib.suppress(*NETWORK):  # best effort, as the protocol says
            await self._client.room_typing(thread, True, timeout=6000)

    async def send(self, out: Outbound) -> str | None:
        if self._client is None:
            raise NotSent("Matrix is not set up (no access token)")
        await self._clear_to_send(out.thread)
        text = out.text + (f"\n\n{reading.REACT_HINT}" if out.kind == "approval" else "")
        content = {"msgtype": "m.text", "body": text, "format": "org.matrix.custom.html",
                   "formatted_body": reading.html_of(text)}
        return await self._send(out.thread, content, f"hearth-{out.delivery_id}")

    async def _clear_to_send(self, room_id: str) -> None:
        """Refused when the room is end-to-end encrypted, as a sync showed or as the
        homeserver says right now (asked before each send: encryption turned on since the
        last sync counts too). Nothing goes into an encrypted room in plain text."""
        room = self._rooms.get(room_id)
        if (room is not None and room.encrypted) or await self._encrypted_now(room_id):
            if room is not None:
                room.encrypted = True
            raise Refused(NO_PLAINTEXT)

    async def _encrypted_now(self, room_id: str) -> bool:
        """Whether the room has `m.room.encryption` state now (404: it has not)."""
        try:
            said = await self._client.room_get_state_event(room_id, "m.room.encryption")
        except NETWORK as error:
            raise NotSent(f"the homeserver cannot be reached ({type(error).__name__})"
                          ) from None
        status = getattr(getattr(said, "transport_response", None), "status", None)
        if isinstance(said, RoomGetStateEventResponse) and status == 200:
            return True
        answered = said if isinstance(said, ErrorResponse) else ErrorResponse.from_dict(
            getattr(said, "content", None) or {})
        if answered.status_code == "M_NOT_FOUND":
            return False
        raise _send_error(answered)

    async def _send(self, room: str, content: dict[str, Any], txn: str) -> str:
        try:
            said = await self._client.room_send(room, "m.room.message", content, tx_id=txn)
        except NETWORK as error:  # the same txnId again is safe: NotSent, not Unsure
            raise NotSent(f"the homeserver cannot be reached ({type(error).__name__})"
                          ) from None
        if not isinstance(said, RoomSendResponse):
            raise _send_error(said)
        return str(said.event_id)

    # -- taking in -----------------------------------------------------------------------

    async def _run(self) -> None:
        """Sync and take in; on a failure say why, pause (doubling), and try again."""
        await self._recall_owner_room()
        while True:
            try:
                await self._sync_forever()
            except SyncFailed as failed:
                self.health = Health("error", f"{failed} (next try in {self._pause:.0f} s)")
                log.warning("matrix: %s", failed)
            await asyncio.sleep(self._pause)
            self._pause = min(PAUSE_MAX, self._pause * 2)

    async def _sync_forever(self) -> None:
        assert self._desk is not None
        position, since = await self._desk.cursor_token(NAME)
        batch = position or 0
        if since is None:  # the first start: begin at the present, read nothing old
            first = await self._sync(None, 0)
            batch += 1
            await self._desk.skip(NAME, batch, first.next_batch)
            since = first.next_batch
        while True:
            answer = await self._sync(since, int(self.config.poll_timeout_seconds * 1000))
            batch += 1
            await self._take_batch(answer, batch)
            since = answer.next_batch

    async def _sync(self, since: str | None, timeout_ms: int) -> Any:
        try:
            answer = await self._client.sync(timeout=timeout_ms, since=since, full_state=False)
        except NETWORK as error:
            raise SyncFailed(f"The homeserver cannot be reached ({type(error).__name__})"
                             ) from None
        if not isinstance(answer, SyncResponse):
            status = getattr(answer, "status_code", None) or "an error"
            raise SyncFailed(f"The homeserver answered /sync with {status}: "
                             f"{masking.mask(str(getattr(answer, 'message', '')))[:200]}")
        self._pause = 1.0  # the failing call itself answered: the backoff starts over
        if self.health.state != "running":
            self.health = Health("running", f"Syncing as {self.config.user_id}.",
                                 {"account": self.config.user_id})
        return answer

    async def _take_batch(self, answer: Any, batch: int) -> None:
        assert self._desk is not None
        for room_id in answer.rooms.invite:
            await self._join(room_id)
        for room_id in answer.rooms.leave:
            self._rooms.pop(room_id, None)
        found: list[Inbound] = []
        for room_id, info in answer.rooms.join.items():
            found += await self._room_messages(room_id, info)
        admitted_last = False
        for index, inbound in enumerate(found):
            last = index == len(found) - 1
            if last:
                inbound = replace(inbound, cursor=batch, token=answer.next_batch)
            admitted_last = await self._take(inbound) and last
        if not admitted_last:
            await self._desk.skip(NAME, batch, answer.next_batch)

    async def _take(self, inbound: Inbound) -> bool:
        assert self._desk is not None
        try:
            await self._desk.receive(inbound)
        except Refusal as refusal:
            if refusal.code == "shutting_down":
                raise asyncio.CancelledError from refusal  # read again at the next start
            log.warning("matrix: a message was not admitted: %s", refusal.sentence)
            return False
        return True

    async def _room_messages(self, room_id: str, info: Any) -> list[Inbound]:
        """The messages of a room's new timeline to take, in order; reactions answered and an
        encrypted room told, on the way. A message is a direct one when the bot shared the
        room with its sender alone both when it was sent and at the batch's end."""
        room, heard = await self._follow(room_id, info)
        events = [event for event, _ in heard]
        taken_back = reading.redacted_in(events)
        shared_now = room.shared_with(self.config.user_id)
        found = []
        for event, shared in heard:
            if event.get("type") == "m.room.encrypted" or room.encrypted:
                if event.get("type") in ("m.room.encrypted", "m.room.message"):
                    await self._tell_encrypted(room_id)
                continue
            await self._reacted(event)
            direct = shared if shared == shared_now else None
            inbound = await self._inbound(room_id, event, taken_back, direct)
            if inbound is not None:
                found.append(inbound)
        return found

    async def _follow(self, room_id: str, info: Any
                      ) -> tuple[reading.Room, list[tuple[dict[str, Any], str | None]]]:
        """The room after this batch, and each event of its timeline not the bot's with the
        one person the bot shared the room with then (None: anyone else could read it). A
        room first met is its state as the homeserver says it now, the batch already in it."""
        known = self._rooms.get(room_id)
        room = known or await self._look_up(room_id)
        if info.summary is not None:
            room.count(info.summary.joined_member_count, info.summary.invited_member_count)
        for event in info.state if known is not None else []:
            room.take(event.source)
        heard = []
        for event in (event.source for event in info.timeline.events):
            if known is not None:
                room.take(event)
            if event.get("sender") != self.config.user_id:
                heard.append((event, room.shared_with(self.config.user_id)))
        return room, heard

    async def _look_up(self, room_id: str) -> reading.Room:
        """The room as the homeserver says it is now (its whole state), known from then on
        and followed by each sync; one it cannot describe is not known (so nobody is alone in
        it with the bot) and is asked again next time."""
        with contextlib.suppress(*NETWORK):
            said = await self._client.room_get_state(room_id)
            if isinstance(said, RoomGetStateResponse):
                room = reading.Room.of_state(said.events)
                remember(self._rooms, room_id, room, ROOMS_KEPT)
                return room
        return reading.Room(known=False)

    async def _inbound(self, room_id: str, event: dict[str, Any], taken_back: set[str],
                       shared: str | None) -> Inbound | None:
        """The message to take, if it is one; `shared` is the one person the bot shares the
        room with (None: a group room)."""
        text = reading.message_text(event, taken_back)
        if text is None:
            if reading.is_edit(event):
                log.info("matrix: an edit of a message was not taken as a new one")
            return None
        direct = shared is not None and shared == event.get("sender")
        bot = self.config.user_id
        if not direct and not reading.addressed(event, bot) and \
                not await self._sent(reading.replied_to(event)):
            return None
        words = reading.without_name(text, bot) if not direct else text.strip()
        if not words:
            return None
        sender = str(event.get("sender"))
        owner = sender in self.config.owner_ids
        if direct and owner:
            self._owner_room = room_id
        return Inbound(channel=NAME, thread=room_id, inbound_id=str(event.get("event_id")),
                       sender=sender, sender_name=sender, text=words, owner=owner,
                       owner_dm=direct and owner)

    async def _recall_owner_room(self) -> None:
        """The owner's direct room as the links remember it, if the homeserver still says it
        is a room of the bot and one of `owner_ids` alone, joined or invited, and unencrypted
        (none: the owner writes there first)."""
        assert self._desk is not None
        for room_id in await self._desk.owner_dms(NAME):
            if self._owners_alone(await self._look_up(room_id)):
                self._owner_room = self._owner_room or room_id
                return

    async def _sent(self, event_id: str | None) -> Sent | None:
        """What the bot sent as `event_id`, as the delivery ledger knows it (a restart
        forgets nothing); None when the event is not the bot's."""
        if not event_id or self._desk is None:
            return None
        return await self._desk.sent_as(NAME, event_id)

    async def _reacted(self, event: dict[str, Any]) -> None:
        found = reading.reaction(event)
        sent = await self._sent(found[0]) if found is not None else None
        if found is None or sent is None or not sent.approval_id or self._desk is None:
            return
        sender = str(event.get("sender"))
        await self._desk.answer(NAME, sent.approval_id, found[1], sender,
                                sender in self.config.owner_ids)

    async def _tell_encrypted(self, room_id: str) -> None:
        if room_id in self._told:
            return
        self._told.add(room_id)
        with contextlib.suppress(SendError):
            await self._send(room_id, {"msgtype": "m.notice", "body": ENCRYPTED},
                             f"hearth-encrypted-{room_id}")

    async def _join(self, room_id: str) -> None:
        with contextlib.suppress(*NETWORK):  # an invite not joined stays one
            await self._client.join(room_id)


def _send_error(said: Any) -> SendError:
    """What a RoomSendError means for the ledger: wait and send again, or refused."""
    code = str(getattr(said, "status_code", "") or "")
    why = masking.mask(str(getattr(said, "message", "") or code))[:200]
    if code == "M_LIMIT_EXCEEDED":
        wait = getattr(said, "retry_after_ms", None)
        return NotSent("the homeserver asked to wait", wait / 1000 if wait else None)
    if code in REFUSED:
        return Refused(f"the homeserver refused it ({code}: {why})")
    return NotSent(f"the homeserver answered {code or 'an error'}: {why}")
