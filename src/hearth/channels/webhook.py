"""The generic webhook channel: any app that can POST JSON is a chat channel.

In: the app POSTs a signed message to `POST /channels/webhook` (the route, `web.api.webhook`,
reads the HTTP request; this adapter decides). The signature is checked (`channels.signing`:
the shared secret, a timestamp at most `max_age_seconds` old), the message id is checked
against those taken in (a replay is refused: in memory for as long as its timestamp is
accepted, and for good by the engine's record of inbound ids), then the message is admitted in
its thread's chat through the desk, or, when it answers an approval, the answer is given.
Whether its sender is the owner is `owner_ids`; anyone else's line is fenced for the model and
their turns ask the owner before changing anything.

Out: `send` POSTs each message the ledger owes to `callback_url`, signed the same way, with
`X-Hearth-Delivery` and the body's `delivery_id`: the receiving app drops an id it already has,
so a message whose send may have arrived is safely sent again (`resend_is_safe`). What became
of the POST is said by the exception `send` raises (`NotSent`, `Refused`, `Unsure`); no error
names the secret or the URL's user and password.

Neither typing nor an owner's own direct chat means anything here: `typing` does nothing and
`owner_thread` is None (a chat is not continued on the webhook from the dashboard).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hearth import __version__, masking
from hearth.channels import signing
from hearth.channels.base import DECISIONS, Desk, Health, NotSent, Outbound, Refused, Unsure
from hearth.config import WebhookConfig
from hearth.engine.intake.channel_inbound import Inbound
from hearth.errors import Refusal

if TYPE_CHECKING:  # imported when the channel is set up: the webhook route alone needs none
    import httpx

log = logging.getLogger(__name__)

NAME = "webhook"
TIMEOUT_SECONDS = 10.0
CONNECT_SECONDS = 5.0
RETRY_AFTER_MAX = 600.0  # a Retry-After longer than this is waited this long
MESSAGE_ID_MAX = 100  # the ledger's message_id column
ANSWERED_BY_WORD = "The approval waiting in this thread was answered."


@dataclass(frozen=True)
class Taken:
    """What an inbound request came to: the HTTP status and the JSON body to answer with."""

    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One inbound message, as the route read it."""

    id: str
    thread: str
    sender: str
    sender_name: str
    text: str
    attachments: tuple[str, ...] = ()  # named only
    files: tuple[tuple[str, bytes], ...] = ()  # (name, bytes): kept in the chat


class WebhookChannel:
    name = NAME
    resend_is_safe = True
    continue_hint = ("A webhook has no chat of yours to move a chat to: its app starts each "
                     "thread.")

    def __init__(self, config: WebhookConfig) -> None:
        import httpx

        self.config = config
        self.max_chars = config.max_chars
        self.measure: Callable[[str], int] = len
        self.send_attempts = config.send_attempts
        self.timeout = httpx.Timeout(TIMEOUT_SECONDS, connect=CONNECT_SECONDS)
        self.health = Health()
        self._secret: str | None = None
        self._desk: Desk | None = None
        self._client: httpx.AsyncClient | None = None
        self._receiving = False
        self._seen: dict[str, float] = {}  # ids taken in lately → when their timestamp expires
        self._url = _usable_url(config.callback_url)

    # -- the protocol --------------------------------------------------------------------

    async def start(self, desk: Desk) -> None:
        self._secret = self.config.resolved_secret()
        masking.know(self._secret, _password(self.config.callback_url))
        self._desk = desk
        import httpx

        self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        self._receiving = True
        self.health = self._health()

    async def stop(self) -> None:
        """Stop taking messages in. Sends still owed until the manager stops use a client of
        their own."""
        self._receiving = False
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def typing(self, thread: str) -> None:
        return None  # a webhook has no "typing"

    def owner_thread(self) -> str | None:
        return None  # no owner's own direct chat: the dashboard does not move chats here

    async def send(self, out: Outbound) -> str | None:
        """POST one message to the callback, signed; its message id (the app's, else ours)."""
        if not self.config.callback_url:
            raise Refused("no callback_url is set in [channels.webhook] of config.toml, so "
                          "there is nowhere to send it")
        if not self._secret:
            raise Refused(f"no secret is set for the webhook: {self._how_to_set_secret()}")
        if self._url is None:
            raise Refused("the callback_url in [channels.webhook] is not an http(s) URL")
        body = json.dumps(payload(out), ensure_ascii=False).encode()
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json",
                   "User-Agent": f"Hearth/{__version__}",
                   signing.TIMESTAMP: timestamp,
                   signing.SIGNATURE: signing.sign(self._secret, timestamp, body),
                   signing.DELIVERY: str(out.delivery_id)}
        response = await self._post(self.config.callback_url, body, headers)
        return _outcome(response, self._url, out.delivery_id)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        if self._client is not None:
            return await _posted(self._client, url, body, headers, self._url or "")
        import httpx

        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            return await _posted(client, url, body, headers, self._url or "")

    # -- taking in (called by the route) --------------------------------------------------

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> int:
        """When the request was signed; refused (401, nothing taken in) when it was not
        signed with the secret lately."""
        if not self._receiving or self._desk is None:
            raise Refusal("channel_stopped", 503,
                          "The webhook channel is not taking messages now (the gateway is "
                          "starting or stopping); send it again shortly.")
        if not self._secret:
            raise Refusal("no_secret", 503,
                          "The webhook channel has no secret, so no message can be checked: "
                          f"{self._how_to_set_secret()}")
        found = signing.problem(self._secret, timestamp, signature, body, time.time(),
                                self.config.max_age_seconds)
        if found is not None:
            log.warning("webhook: a request was refused (%s)", found[0])
            raise Refusal(found[0], 401, found[1])
        return int(str(timestamp).strip())

    async def take_message(self, message: Message, signed_at: int) -> Taken:
        """Admit the message in its thread's chat (once)."""
        desk = self._taking(message.id, signed_at)
        try:
            received = await desk.receive(Inbound(
                channel=NAME, thread=message.thread, inbound_id=message.id,
                sender=message.sender, sender_name=message.sender_name, text=message.text,
                owner=self.is_owner(message.sender), owner_dm=False,
                attachments=message.attachments, files=message.files))
        except BaseException:
            self._seen.pop(message.id, None)  # not taken in: it may be sent again
            raise
        if received is None:
            return Taken(200, {"answered": ANSWERED_BY_WORD})
        if received.admitted is None:
            raise _replayed()
        admitted = received.admitted
        return Taken(202, {"run_id": admitted.run_id, "chat": admitted.session_key,
                           "status": admitted.status})

    async def take_answer(self, message_id: str, signed_at: int, sender: str,
                          approval_id: str, decision: str) -> Taken:
        """Answer an approval: the owner's answer is given; anyone else's is refused."""
        desk = self._taking(message_id, signed_at)
        owner = self.is_owner(sender)
        try:
            sentence = await desk.answer(NAME, approval_id, decision, sender, owner)
        except BaseException:
            self._seen.pop(message_id, None)
            raise
        if not owner:
            raise Refusal("not_owner", 403, sentence)
        return Taken(200, {"answered": sentence})

    def is_owner(self, sender: str) -> bool:
        return sender in self.config.owner_ids

    def _taking(self, message_id: str, signed_at: int) -> Desk:
        """Claim the message id (a replay is refused) and the desk to hand it to."""
        if self._desk is None:
            raise Refusal("channel_stopped", 503, "The webhook channel is not started.")
        now = time.time()
        self._seen = {key: until for key, until in self._seen.items() if until >= now}
        if message_id in self._seen:
            raise _replayed()
        self._seen[message_id] = signed_at + self.config.max_age_seconds
        return self._desk

    # -- health --------------------------------------------------------------------------

    def _health(self) -> Health:
        if not self._secret:
            return Health("error", "No secret is set, so every message is refused: "
                          f"{self._how_to_set_secret()}")
        if not self.config.callback_url:
            return Health("error", "Messages are taken in, but no callback_url is set in "
                          "[channels.webhook] of config.toml, so no answer can be sent.")
        if self._url is None:
            return Health("error", "The callback_url in [channels.webhook] is not an http(s) "
                          "URL, so no answer can be sent.")
        owners = ("" if self.config.owner_ids else
                  " No owner_ids are set: every sender is a guest.")
        return Health("running", "Taking signed messages in at POST /channels/webhook; "
                      "answers go to the callback_url." + owners)

    def _how_to_set_secret(self) -> str:
        where = self.config.secret_env or "HEARTH_WEBHOOK_SECRET"
        return (f"set the environment variable {where} (or secret_env, or secret, in "
                "[channels.webhook] of config.toml) and restart the gateway.")


def payload(out: Outbound) -> dict[str, Any]:
    """The JSON body of one outbound POST."""
    approval = None
    if out.kind == "approval" and out.approval_id:
        choices = [decision for _, decision in out.buttons] or list(DECISIONS)
        approval = {"id": out.approval_id, "choices": choices}
    return {"delivery_id": out.delivery_id, "kind": out.kind, "chat": out.chat,
            "thread": out.thread, "text": out.text, "part": out.part, "parts": out.parts,
            "format": "markdown", "approval": approval}


async def _posted(client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str],
                  shown: str) -> httpx.Response:
    """The callback's response; a failure raised as what it means for the message."""
    import httpx

    try:
        return await client.post(url, content=body, headers=headers)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as error:
        raise NotSent(f"could not connect to {shown} ({_why(error)})") from None
    except httpx.TimeoutException:
        raise Unsure(f"{shown} did not answer in time; the message may have arrived") from None
    except (httpx.NetworkError, httpx.RemoteProtocolError) as error:
        raise Unsure(f"the connection to {shown} broke before it answered ({_why(error)}); "
                     "the message may have arrived") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise Refused(f"the callback_url cannot be called ({type(error).__name__})") from None


def _outcome(response: httpx.Response, shown: str, delivery_id: int) -> str:
    status = response.status_code
    if 200 <= status < 300:
        return _message_id(response) or str(delivery_id)
    if status == 429 or status == 408 or status >= 500:
        raise NotSent(f"{shown} answered {status} {response.reason_phrase}".rstrip(),
                      _retry_after(response.headers.get("retry-after")))
    if 300 <= status < 400:
        raise Refused(f"{shown} answered {status} (a redirect, which is not followed): set "
                      "callback_url to where it leads")
    raise Refused(f"{shown} answered {status} {response.reason_phrase}".rstrip())


def _message_id(response: httpx.Response) -> str | None:
    """The app's id for the message, when its answer is JSON that gives one."""
    try:
        answer = response.json()
    except ValueError:
        return None
    found = answer.get("message_id") if isinstance(answer, dict) else None
    if isinstance(found, str | int) and not isinstance(found, bool) and str(found):
        return str(found)[:MESSAGE_ID_MAX]
    return None


def _retry_after(value: str | None) -> float | None:
    """A Retry-After in seconds (an HTTP date is not read), at most RETRY_AFTER_MAX."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if seconds != seconds or seconds < 0:  # NaN, or negative
        return None
    return min(seconds, RETRY_AFTER_MAX)


def _replayed() -> Refusal:
    return Refusal("replayed", 401,
                   "A message with this id was taken in already; it is not taken twice.")


def _usable_url(url: str | None) -> str | None:
    """The callback URL as it may be shown: scheme, host, port and path (never its user,
    password or query); None when it is not an http(s) URL."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"


def _password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


def _why(error: Exception) -> str:
    """A short, masked reason from a connection error (never the URL's secrets)."""
    text = str(error).strip() or type(error).__name__
    return masking.mask(text)[:200]
