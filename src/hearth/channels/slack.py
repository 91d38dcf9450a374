"""The Slack channel: a Slack app's bot, on Slack's own SDK (slack_sdk).

In: Slack POSTs each event to `/channels/slack/events` and each button press to
`/channels/slack/actions` (the routes, `web.api.slack`, read the HTTP request; this adapter
decides). Every request is checked with the app's signing secret (Slack's v0 signature over
the timestamp and the raw body, by the SDK's `SignatureVerifier`; a timestamp older than
`max_age_seconds` is refused): a bad or stale one is 401 and takes nothing in. An event Slack
sends again (a retry, a replay) is acknowledged with 200 and admitted once: its `event_id` is
the inbound id the engine records with the admission.

Threads: a direct message's thread is its conversation (`D…`); a mention in a channel
(`app_mention`) is answered in its Slack thread, whose thread is `<channel>/<thread_ts>`. A
message from a bot, an edit of a message (already answered or not) and a deletion are not
messages to answer: they are skipped, saying so in the log. The owner's own thread
(`owner_thread`: "Continue on Slack", a guest's approvals) is the same `D…` id their direct
messages arrive under: at start the adapter opens that conversation (`conversations.open`, which
gives back the one that exists), and an owner's direct message confirms it; until either did,
there is none. (A thread named `@<user id>`, linked before, is still sent to that user's DM.)

Out: `send` posts with `chat.postMessage` (in the thread), approvals with Block Kit buttons
that only an owner's press answers. While a turn runs, `typing` posts a "…" placeholder once,
and the answer's first part replaces it (`chat.update`), so the thread shows one message that
becomes the answer (the placeholder is kept until Slack took the change). A refusal (a channel
the bot is not in) is final. A 429 holds every call of the adapter until its `Retry-After` has
passed (at most `RATE_WAIT_MOST` seconds; 1 s when it says none), then the refused call is made
once more; a second 429 hands the message back to the ledger to wait and send again (Slack took
nothing, so nothing is sent twice). No placeholder is posted while Slack asks to wait. The
SDK's client is blocking (urllib): each call runs in a worker thread (its own retry handlers
are off: they sleep in the thread, unbounded, and hold back no other call).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any

from hearth import masking
from hearth.channels.base import (
    APPROVAL_BUTTONS,
    DECISIONS,
    Desk,
    Health,
    NotSent,
    OneAtATime,
    Outbound,
    Refused,
    SendError,
    Unsure,
    remember,
)
from hearth.config import SlackConfig
from hearth.engine.intake.channel_inbound import Inbound
from hearth.errors import Refusal

log = logging.getLogger(__name__)

NAME = "slack"
APPROVAL_PREFIX = "ap"
PLACEHOLDER = "…"
THREADS_KEPT = 2000  # the threads whose last send is kept in mind
QUIET_SECONDS = 10.0  # no placeholder in a thread that was sent a message this lately
MENTION = re.compile(r"<@[A-Z0-9]+>")
RATE_WAIT_DEFAULT = 1.0  # seconds waited after a 429 that says no (readable) Retry-After
RATE_WAIT_MOST = 60.0  # a longer Retry-After is waited this long
REFUSED = frozenset({"channel_not_found", "not_in_channel", "is_archived", "msg_too_long",
                     "no_text", "invalid_blocks", "cant_update_message", "message_not_found"})


class SlackChannel:
    name = NAME
    resend_is_safe = False  # Slack cannot say whether a post arrived

    def __init__(self, config: SlackConfig) -> None:
        self.config = config
        self.max_chars = config.max_chars
        self.measure: Callable[[str], int] = len
        self.health = Health()
        self._token = config.resolved_token()
        self._secret = config.resolved_secret()
        masking.know(self._token, self._secret)
        self._desk: Desk | None = None
        self._client: Any = None  # slack_sdk.WebClient, made at start
        self._bot_user: str | None = None
        self._owner_dm: str | None = None  # the first owner's direct conversation (D…)
        self._dms: dict[str, str] = {}  # user id → direct conversation (`@<user>` threads)
        self._quiet_until = 0.0  # monotonic: no Web API call before (a 429's Retry-After)
        self._placeholders: dict[str, str] = {}  # thread → the "…" message's ts
        self._sent_at: dict[str, float] = {}  # thread → when a message last went to it
        self._locks = OneAtATime()  # one placeholder or send at a time in a thread

    # -- the protocol --------------------------------------------------------------------

    async def start(self, desk: Desk) -> None:
        self._desk = desk
        if not self._token or not self._secret:
            self.health = Health("error", "Slack needs its bot token and signing secret: set "
                                 "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or the keys of "
                                 "[channels.slack]) and restart.")
            return
        from slack_sdk import WebClient

        self._client = WebClient(token=self._token, base_url=self.config.api_url,
                                 timeout=20, retry_handlers=[])
        try:
            said = await self._call("auth_test")
        except SendError as error:
            self.health = Health("error", f"Slack did not accept the bot token ({error}).")
            return
        self._bot_user = str(said.get("user_id") or "") or None
        unopened = await self._open_owner_dm()
        self.health = Health("running", f"Connected as {said.get('user', 'the bot')}; events "
                             "are taken in at POST /channels/slack/events." + (
                                 f" Your direct conversation could not be opened ({unopened}):"
                                 " Continue on Slack waits until you write to the bot."
                                 if unopened else ""),
                             {"bot": str(said.get("user", ""))})

    async def stop(self) -> None:
        self._desk = None

    @property
    def continue_hint(self) -> str | None:
        """Why chats cannot be continued here yet (Settings → Channels), when owner_ids is set."""
        if not self.config.owner_ids:
            return None  # the page's own sentence: set owner_ids
        return ("Write to the bot in a direct message first: Slack did not open your direct "
                "conversation when the channel started, and chats can be continued there "
                "from your first message on.")

    def owner_thread(self) -> str | None:
        """The first owner's direct conversation with the bot (`D…`): the thread their direct
        messages arrive under. None until it was opened at start or they wrote in it."""
        return self._owner_dm

    async def _open_owner_dm(self) -> str:
        """Open the first owner's direct conversation (Slack gives back the one there is);
        "" when it is known, else why not."""
        if not self.config.owner_ids:
            return ""
        try:  # a 429 is not waited twice here: the other channels start after this one
            opened = await self._call("conversations_open", again=False,
                                      users=self.config.owner_ids[0])
        except SendError as error:
            log.warning("slack: the owner's direct conversation was not opened (%s)", error)
            return str(error)
        found = str((opened.get("channel") or {}).get("id") or "")
        self._owner_dm = found or self._owner_dm
        return "" if found else "Slack named no conversation"

    async def typing(self, thread: str) -> None:
        """A "…" placeholder in the thread, once per answer (none just after a message went
        there: the turn is ending); the answer's first part replaces it."""
        if self._client is None:
            return
        async with self._locks.held(thread):
            now = time.monotonic()
            recent = now - self._sent_at.get(thread, -QUIET_SECONDS)
            if thread in self._placeholders or recent < QUIET_SECONDS \
                    or now < self._quiet_until:  # Slack asked to wait: no placeholder
                return
            try:
                channel, thread_ts = await self._where(thread)
                said = await self._call("chat_postMessage", again=False, channel=channel,
                                        text=PLACEHOLDER, thread_ts=thread_ts)
            except SendError:
                return
            remember(self._placeholders, thread, str(said["ts"]), THREADS_KEPT)

    async def send(self, out: Outbound) -> str | None:
        if self._client is None:
            raise NotSent("Slack is not set up (no bot token or signing secret)")
        async with self._locks.held(out.thread):
            sent = await self._send(out)
            remember(self._sent_at, out.thread, time.monotonic(), THREADS_KEPT)
            return sent

    async def _send(self, out: Outbound) -> str:
        channel, thread_ts = await self._where(out.thread)
        blocks = _approval_blocks(out) if out.buttons and out.approval_id else None
        placeholder = self._placeholders.get(out.thread)
        if placeholder is not None and out.part == 1:
            return await self._replace(out, channel, placeholder, blocks)
        said = await self._call("chat_postMessage", channel=channel, text=out.text,
                                thread_ts=thread_ts, blocks=blocks)
        return str(said["ts"])

    async def _replace(self, out: Outbound, channel: str, placeholder: str,
                       blocks: list[dict[str, Any]] | None) -> str:
        """The answer's first part in place of the "…"; the placeholder is kept for the next
        try while Slack never took the change (NotSent), let go once it did or refused."""
        try:
            said = await self._call("chat_update", channel=channel, ts=placeholder,
                                    text=out.text, blocks=blocks)
        except NotSent:
            raise
        except SendError:
            self._placeholders.pop(out.thread, None)
            raise
        self._placeholders.pop(out.thread, None)
        return str(said["ts"])

    # -- taking in (called by the routes) -------------------------------------------------

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> None:
        """Refuse (401, nothing taken in) a request not signed with the secret lately."""
        if self._desk is None or not self._secret:
            raise Refusal("channel_stopped", 503, "The Slack channel is not taking events now "
                          "(it is starting, stopping, or has no signing secret).")
        from slack_sdk.signature import SignatureVerifier

        try:
            fresh = abs(time.time() - int(str(timestamp))) <= self.config.max_age_seconds
        except ValueError:
            fresh = False
        if not fresh or not SignatureVerifier(self._secret).is_valid(
                body, str(timestamp), str(signature)):
            log.warning("slack: a request was refused (bad or stale signature)")
            raise Refusal("bad_signature", 401, "This request was not signed with the Slack "
                          "app's signing secret in the last few minutes; nothing was taken in.")

    async def take_event(self, envelope: dict[str, Any]) -> str:
        """Admit the event's message in its thread's chat (once); what became of it."""
        event = envelope.get("event")
        if not isinstance(event, dict) or self._desk is None:
            return "ignored"
        inbound = self._inbound(event, str(envelope.get("event_id") or ""))
        if inbound is None:
            return "ignored"
        received = await self._desk.receive(inbound)
        if received is None:
            return "answered"
        return "admitted" if received.admitted is not None else "again"

    async def take_action(self, payload: dict[str, Any]) -> str:
        """A button pressed on an approval: answered by an owner only, then its buttons go."""
        actions = payload.get("actions") or []
        value = str(actions[0].get("value", "")) if actions and isinstance(actions[0], dict) \
            else ""
        parts = value.split(":")
        if len(parts) != 3 or parts[0] != APPROVAL_PREFIX or parts[2] not in DECISIONS \
                or self._desk is None:
            return "This button is not Hearth's."
        user = str((payload.get("user") or {}).get("id", ""))
        owner = user in self.config.owner_ids
        sentence = await self._desk.answer(NAME, parts[1], parts[2], user, owner)
        message, channel = payload.get("message") or {}, payload.get("channel") or {}
        if owner and message.get("ts") and channel.get("id"):
            try:
                await self._call("chat_update", channel=channel["id"], ts=message["ts"],
                                 text=f"{message.get('text', '')}\n{sentence}", blocks=[])
            except SendError as error:
                log.info("slack: an approval's buttons stayed (%s)", error)
        return sentence

    def _inbound(self, event: dict[str, Any], event_id: str) -> Inbound | None:
        kind, user = event.get("type"), event.get("user")
        if event.get("bot_id") or event.get("subtype") or not isinstance(user, str) \
                or user == self._bot_user:
            if event.get("subtype") in ("message_changed", "message_deleted"):
                log.info("slack: an edit or a deletion was not taken as a message")
            return None
        channel = str(event.get("channel") or "")
        if kind == "message" and event.get("channel_type") == "im":
            thread = channel
            if user == next(iter(self.config.owner_ids), None):
                self._owner_dm = channel  # their DM, as Slack names it: their own thread
        elif kind == "app_mention":
            thread = f"{channel}/{event.get('thread_ts') or event.get('ts')}"
        else:
            return None
        text = MENTION.sub("", str(event.get("text") or "")).strip()
        if not text:
            return None
        owner = user in self.config.owner_ids
        return Inbound(channel=NAME, thread=thread, inbound_id=event_id or str(event.get("ts")),
                       sender=user, sender_name=user, text=text, owner=owner,
                       owner_dm=owner and thread == channel)

    # -- the Web API ---------------------------------------------------------------------

    async def _where(self, thread: str) -> tuple[str, str | None]:
        """The conversation and the Slack thread (ts) a thread's messages go to."""
        if thread.startswith("@"):
            user = thread[1:]
            if user not in self._dms:
                opened = await self._call("conversations_open", users=user)
                self._dms[user] = str(opened["channel"]["id"])
            return self._dms[user], None
        channel, _, thread_ts = thread.partition("/")
        return channel, thread_ts or None

    async def _call(self, method: str, *, again: bool = True, **args: Any) -> Any:
        """One Web API call, once any 429's Retry-After has passed; a call refused with a 429
        is made once more after its own (`again`), else the 429 is raised (NotSent)."""
        await self._quiet()
        try:
            return await self._call_once(method, **args)
        except RateLimited:
            if not again:
                raise
        await self._quiet()
        return await self._call_once(method, **args)

    async def _quiet(self) -> None:
        """Sleep until no 429 asks to wait any more (no busy loop: one sleep per 429 heard)."""
        while (left := self._quiet_until - time.monotonic()) > 0:
            await asyncio.sleep(left)

    async def _call_once(self, method: str, **args: Any) -> Any:
        """One Web API call in a worker thread; its failure as what it means for a send (a 429
        also holds every later call back until its Retry-After)."""
        from slack_sdk.errors import SlackApiError

        call = getattr(self._client, method)
        try:
            return (await asyncio.to_thread(call, **args)).data
        except SlackApiError as error:
            failure = _send_error(error)
            if isinstance(failure, RateLimited):
                self._quiet_until = max(self._quiet_until,
                                        time.monotonic() + failure.retry_after)
            raise failure from None
        except (OSError, TimeoutError) as error:  # urllib: refused, reset, timed out
            raise _network_error(error) from None


class RateLimited(NotSent):
    """Slack answered 429: nothing was taken; wait `retry_after` seconds (bounded)."""

    retry_after: float

    def __init__(self, retry_after: float) -> None:
        super().__init__("Slack asked to wait", retry_after)


def _approval_blocks(out: Outbound) -> list[dict[str, Any]]:
    buttons = out.buttons or APPROVAL_BUTTONS
    return [{"type": "section", "text": {"type": "mrkdwn", "text": out.text[:3000]}},
            {"type": "actions", "block_id": f"approval-{out.approval_id}", "elements": [
                {"type": "button", "text": {"type": "plain_text", "text": label},
                 "value": f"{APPROVAL_PREFIX}:{out.approval_id}:{decision}",
                 "action_id": decision} for label, decision in buttons]}]


def _send_error(error: Any) -> SendError:
    """What a Web API error means for the ledger: wait and send again, or refused."""
    response = error.response
    status = getattr(response, "status_code", 0)
    code = str((getattr(response, "data", None) or {}).get("error", "error"))
    if status == 429 or code == "ratelimited":
        return RateLimited(_retry_after(getattr(response, "headers", None) or {}))
    if status >= 500:
        return NotSent(f"Slack answered {status}")
    if code in REFUSED:
        return Refused(f"Slack refused it ({code})")
    return NotSent(f"Slack answered {masking.mask(code)}")


def _retry_after(headers: Any) -> float:
    """The seconds a 429's Retry-After asks for, between 0 and RATE_WAIT_MOST (none, or one
    that is not a number: RATE_WAIT_DEFAULT)."""
    said = next((v for k, v in dict(headers).items() if str(k).lower() == "retry-after"), None)
    if isinstance(said, list | tuple):
        said = said[0] if said else None
    try:
        wait = float(str(said))
    except ValueError:
        return RATE_WAIT_DEFAULT
    return min(max(wait, 0.0), RATE_WAIT_MOST) if math.isfinite(wait) else RATE_WAIT_DEFAULT


def _network_error(error: BaseException) -> SendError:
    why = masking.mask(str(error))[:200]
    if isinstance(error, ConnectionRefusedError) or "refused" in why.lower():
        return NotSent(f"Slack cannot be reached ({why})")
    return Unsure(f"the connection to Slack broke during the call ({why})")


def form_payload(body: bytes) -> dict[str, Any]:
    """The JSON `payload` field of an interactivity request's form body (ValueError: none)."""
    from urllib.parse import parse_qs

    found = parse_qs(body.decode("utf-8", "replace")).get("payload")
    if not found:
        raise ValueError("no payload")
    payload = json.loads(found[0])
    if not isinstance(payload, dict):
        raise ValueError("not an object")
    return payload

