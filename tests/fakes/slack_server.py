"""A real-HTTP fake of Slack for the test-suite: the Web API methods the Slack channel calls,
and Slack's side of the Events API (signed event and interactivity deliveries to the gateway).

``FakeSlack`` serves on 127.0.0.1 (a free port). The unmodified ``slack_sdk.WebClient`` works
against it with ``base_url=fake.api_url``; nothing is monkeypatched.

Web API (``POST /api/<method>``, form-encoded or JSON, ``Authorization: Bearer <token>``; every
answer is ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` as Slack's are, a wrong
token ``invalid_auth``):

- ``auth.test`` → the bot's ``user_id`` (``BOT_USER``), ``user``, ``team``;
- ``conversations.open(users)`` → a direct conversation ``D<user>``;
- ``chat.postMessage(channel, text, thread_ts?, blocks?)`` → a new ``ts`` (kept in ``posts``);
- ``chat.update(channel, ts, text, blocks?)`` → the message changed (kept in ``updates``;
  ``message_not_found`` for a ts never posted).

``fail(method, status, error, retry_after, times, text)`` makes the next calls of a method
(those whose ``text`` is ``text``, when given: one scripted request) answer an error (429 with
``Retry-After`` as Slack rate-limits); ``limited`` keeps when each 429 was answered, and
``calls`` when each call came, so a test sees whether the next one waited.

Events: ``deliver(url, event)`` POSTs an ``event_callback`` envelope (a fresh ``event_id``, or
the one given) to the gateway's events URL, signed as Slack signs (``v0=`` HMAC-SHA256 of
``v0:<timestamp>:<body>`` with the signing secret, ``X-Slack-Request-Timestamp``), with
``X-Slack-Retry-Num`` for a retry; ``press(url, …)`` POSTs a ``block_actions`` payload as a
form field, signed the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple, Self
from urllib.parse import parse_qs, urlencode

import httpx

from tests.fakes.loopback import Loopback

TOKEN = "xoxb-test-0123456789"
SECRET = "slack-signing-secret-0123456789"
BOT_USER = "UBOT0001"


@dataclass
class Posted:
    channel: str
    text: str
    ts: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] | None = None
    history: list[str] = field(default_factory=list)  # what chat.update made of it, in order

    @property
    def now(self) -> str:
        return self.history[-1] if self.history else self.text


class Seen(NamedTuple):
    """A Web API call the fake was sent: its method, when (monotonic), the text it carried."""

    method: str
    at: float
    text: str


@dataclass(frozen=True)
class Fault:
    status: int
    error: str
    retry_after: int | str | None  # seconds, or anything else a server might send
    text: str | None  # only the call with this text (None: the next call of the method)


@dataclass(frozen=True)
class Limited:
    """A 429 the fake answered: to which method, when (monotonic), and what it asked."""

    method: str
    at: float
    retry_after: int | str | None
    text: str


class FakeSlack(Loopback):
    def __init__(self, token: str = TOKEN, secret: str = SECRET) -> None:
        super().__init__()
        self.token, self.secret = token, secret
        self.posts: list[Posted] = []
        self.updates: list[dict[str, Any]] = []
        self.calls: list[Seen] = []
        self.limited: list[Limited] = []
        self._faults: dict[str, list[Fault]] = {}
        self._ts = itertools.count(1)
        self._cond = threading.Condition()

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                status, answer, headers = fake._call(self.path, self.headers, raw)
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(ThreadingHTTPServer(("127.0.0.1", self.port), Handler))
        return self

    def stop(self) -> None:
        self._unserve()

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    # -- the Web API ---------------------------------------------------------------------

    def fail(self, method: str, status: int, error: str, *,
             retry_after: int | str | None = None, times: int = 1,
             text: str | None = None) -> None:
        with self._cond:
            self._faults.setdefault(method, []).extend(
                [Fault(status, error, retry_after, text)] * times)

    def _fault(self, method: str, args: dict[str, Any]) -> Fault | None:
        faults = self._faults.get(method) or []
        found = next((f for f in faults if f.text is None or f.text == args.get("text")), None)
        if found is not None:
            faults.remove(found)
        return found

    def _call(self, path: str, headers: Any, raw: bytes
              ) -> tuple[int, dict[str, Any], dict[str, str]]:
        method = path.removeprefix("/api/").split("?", 1)[0]
        args = _args(headers.get("Content-Type", ""), raw, path)
        with self._cond:
            self.calls.append(Seen(method, time.monotonic(), str(args.get("text", ""))))
            if headers.get("Authorization") != f"Bearer {self.token}":
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            fault = self._fault(method, args)
            if fault is not None:
                if fault.status == 429:
                    self.limited.append(Limited(method, time.monotonic(), fault.retry_after,
                                                str(args.get("text", ""))))
                extra = {} if fault.retry_after is None else {
                    "Retry-After": str(fault.retry_after)}
                self._cond.notify_all()
                return fault.status, {"ok": False, "error": fault.error}, extra
            answer = self._answer(method, args)
            self._cond.notify_all()
        return 200, answer, {}

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "user_id": BOT_USER, "user": "hearth", "team": "Home"}
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": f"D{args.get('users', '')}"}}
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            blocks = args.get("blocks")
            self.posts.append(Posted(str(args["channel"]), str(args.get("text", "")), ts,
                                     args.get("thread_ts"),
                                     json.loads(blocks) if isinstance(blocks, str) else blocks))
            return {"ok": True, "channel": args["channel"], "ts": ts}
        if method == "chat.update":
            found = next((p for p in self.posts if p.ts == args.get("ts")), None)
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            found.history.append(str(args.get("text", "")))
            if "blocks" in args:
                blocks = args["blocks"]
                found.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            self.updates.append(args)
            return {"ok": True, "channel": args["channel"], "ts": found.ts}
        return {"ok": False, "error": "unknown_method"}

    def in_channel(self, channel: str) -> list[Posted]:
        with self._cond:
            return [p for p in self.posts if p.channel == channel]

    def wait_for(self, check: Any, timeout: float = 15.0) -> None:
        """Until `check()` holds (each Web API call wakes the wait)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"Slack never saw it; posts: {self.posts}")
                self._cond.wait(min(left, 0.2))

    # -- Slack's side of the Events API ---------------------------------------------------

    def sign(self, body: bytes, timestamp: str) -> str:
        base = b"v0:" + timestamp.encode() + b":" + body
        return "v0=" + hmac.new(self.secret.encode(), base, hashlib.sha256).hexdigest()

    def deliver(self, url: str, event: dict[str, Any], *, event_id: str | None = None,
                retry: int | None = None, at: float | None = None,
                signature: str | None = None) -> httpx.Response:
        envelope = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
                    "event": event, "event_id": event_id or f"Ev{uuid.uuid4().hex[:10]}",
                    "event_time": int(time.time())}
        return self.post(url, json.dumps(envelope).encode(), "application/json",
                         retry=retry, at=at, signature=signature)

    def press(self, url: str, user: str, value: str, channel: str, ts: str,
              text: str = "") -> httpx.Response:
        payload = {"type": "block_actions", "user": {"id": user}, "channel": {"id": channel},
                   "message": {"ts": ts, "text": text},
                   "actions": [{"type": "button", "value": value, "action_id": "a"}]}
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return self.post(url, body, "application/x-www-form-urlencoded")

    def post(self, url: str, body: bytes, content_type: str, *, retry: int | None = None,
             at: float | None = None, signature: str | None = None) -> httpx.Response:
        stamp = str(int(time.time() if at is None else at))
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp,
                   "X-Slack-Signature": signature or self.sign(body, stamp)}
        if retry is not None:
            headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "timeout"})
        return httpx.post(url, content=body, headers=headers, timeout=10)


def _args(content_type: str, raw: bytes, path: str) -> dict[str, Any]:
    if "json" in content_type:
        found = json.loads(raw or b"{}")
        return found if isinstance(found, dict) else {}
    query = path.split("?", 1)[1] if "?" in path else ""
    pairs = parse_qs(raw.decode() + ("&" + query if query else ""))
    return {key: values[0] for key, values in pairs.items()}


def dm(user: str, text: str) -> dict[str, Any]:
    """A direct message event from `user` in their conversation with the bot."""
    return {"type": "message", "channel_type": "im", "channel": f"D{user}", "user": user,
            "text": text, "ts": f"{time.time():.6f}"}


def mention(user: str, channel: str, text: str, thread_ts: str | None = None
            ) -> dict[str, Any]:
    """An `app_mention` in a channel (`<@BOT> …`), in a thread when `thread_ts` is given."""
    event = {"type": "app_mention", "channel": channel, "user": user,
             "text": f"<@{BOT_USER}> {text}", "ts": f"{time.time():.6f}"}
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event
