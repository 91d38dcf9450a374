"""A real-HTTP fake Matrix homeserver for the test-suite: the client-server API the Matrix
channel uses, so matrix-nio's unmodified AsyncClient works against it over loopback.

``FakeMatrix`` serves on 127.0.0.1 (a free port). The bot is ``BOT`` with the access token
``TOKEN`` (sent as ``Authorization: Bearer`` or ``?access_token=``; a wrong one: 401
``M_UNKNOWN_TOKEN``). Paths are ``/_matrix/client/v3/…`` (``r0`` is taken too):

- ``GET /account/whoami`` → the bot's ``user_id``;
- ``GET /sync?since=&timeout=`` → what happened after ``since`` (``s<N>``, the stream position
  the last answer's ``next_batch`` said): each joined room's new timeline events (a member
  joining, invited or leaving, and encryption turned on, are state events in it, as Synapse
  sends them), invites; with none, it long-polls up to ``timeout`` ms. A sync without ``since``
  answers everything so far (a client's first sync). Like Synapse, it sends no ``summary``
  unless members are lazy-loaded: ``summaries = True`` sends one with every room's counts;
- ``PUT /rooms/{room}/send/{type}/{txnId}`` → an ``event_id``; the same ``txnId`` again answers
  the same event and sends nothing (Matrix's idempotency), kept in ``sent``;
- ``PUT /rooms/{room}/typing/{user}`` → ``{}`` (kept in ``typing``);
- ``GET /rooms/{room}/joined_members``; ``GET /rooms/{room}/state`` (its members, joined and
  invited, and ``m.room.encryption`` once on) and ``/state/{type}/{key}`` (404 ``M_NOT_FOUND``
  when there is none); ``POST /join/{room}`` and ``/rooms/{room}/join`` (the bot joins).

Tests make what happens: ``room(id, members, encrypted=)`` (a room as it already was),
``message(room, sender, body, **content)``, ``reaction``, ``redaction``, ``encrypted`` (an
encrypted event), ``join``, ``invite_member``, ``leave``, ``encrypt`` (encryption turned on),
``invite`` (the bot invited); ``fail(kind, status, times)`` makes the next ``sync``, ``send``
or ``state`` answer an error (429 with ``retry_after_ms``).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.loopback import Loopback

BOT = "@hearth:example.org"
TOKEN = "syt_test_0123456789"
PATH = re.compile(r"^/_matrix/client/(?:v3|r0)(/.*)$")


@dataclass
class Sent:
    room: str
    type: str
    txn: str
    event_id: str
    content: dict[str, Any]

    @property
    def body(self) -> str:
        return str(self.content.get("body", ""))


@dataclass
class _Room:
    members: list[str]  # joined
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    invited: list[str] = field(default_factory=list)
    encrypted: bool = False

    def state(self) -> list[dict[str, Any]]:
        """The room's state now, as `GET /rooms/{room}/state` answers it."""
        found = [_state("m.room.member", user, user, {"membership": "join"})
                 for user in self.members]
        found += [_state("m.room.member", user, user, {"membership": "invite"})
                  for user in self.invited]
        if self.encrypted:
            found.append(_state("m.room.encryption", "", BOT, ENCRYPTION))
        return found


ENCRYPTION = {"algorithm": "m.megolm.v1.aes-sha2"}


def _state(kind: str, key: str, sender: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "state_key": key, "sender": sender, "content": content,
            "event_id": f"$state-{kind}-{key}", "origin_server_ts": 1}


class FakeMatrix(Loopback):
    def __init__(self) -> None:
        super().__init__()
        self.rooms: dict[str, _Room] = {}
        self.invites: list[tuple[int, str, str]] = []  # (position, room, inviter)
        self.sent: list[Sent] = []
        self.typing: list[str] = []
        self.syncs: list[str | None] = []
        self.summaries = False  # Synapse sends a summary only when members are lazy-loaded
        self._position = 0
        self._ids = itertools.count(1)
        self._txns: dict[tuple[str, str], Sent] = {}
        self._faults: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._cond = threading.Condition()

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _go(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                status, answer = fake._handle(method, self.path, self.headers, raw)
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a gateway stopped mid-sync)

            def do_GET(self) -> None:  # noqa: N802
                self._go("GET")

            def do_PUT(self) -> None:  # noqa: N802
                self._go("PUT")

            def do_POST(self) -> None:  # noqa: N802
                self._go("POST")

        self._serve(ThreadingHTTPServer(("127.0.0.1", self.port), Handler))
        return self

    def stop(self) -> None:
        with self._cond:
            self._cond.notify_all()
        self._unserve()

    # -- what happens ---------------------------------------------------------------------

    def room(self, room_id: str, members: list[str], encrypted: bool = False) -> str:
        with self._cond:
            self.rooms[room_id] = _Room([BOT, *members], encrypted=encrypted)
        return room_id

    def event(self, room: str, sender: str, kind: str, content: dict[str, Any],
              **extra: Any) -> str:
        with self._cond:
            self._position += 1
            event_id = f"$e{next(self._ids)}"
            self.rooms[room].events.append((self._position, {
                "type": kind, "event_id": event_id, "sender": sender, "content": content,
                "origin_server_ts": int(time.time() * 1000), "unsigned": {}, **extra}))
            self._cond.notify_all()
        return event_id

    def message(self, room: str, sender: str, body: str, **content: Any) -> str:
        return self.event(room, sender, "m.room.message",
                          {"msgtype": "m.text", "body": body, **content})

    def reaction(self, room: str, sender: str, event_id: str, key: str) -> str:
        return self.event(room, sender, "m.reaction", {"m.relates_to": {
            "rel_type": "m.annotation", "event_id": event_id, "key": key}})

    def redaction(self, room: str, sender: str, event_id: str) -> str:
        return self.event(room, sender, "m.room.redaction", {"redacts": event_id},
                          redacts=event_id)

    def encrypted(self, room: str, sender: str) -> str:
        return self.event(room, sender, "m.room.encrypted", {
            "algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgA", "sender_key": "k",
            "device_id": "D", "session_id": "s"})

    def join(self, room: str, user: str) -> str:
        """`user` joins `room` (an invite taken, or a public room entered)."""
        return self._membership(room, user, user, "join")

    def invite_member(self, room: str, inviter: str, user: str) -> str:
        """`inviter` invites `user`, who has not joined (yet)."""
        return self._membership(room, inviter, user, "invite")

    def leave(self, room: str, user: str) -> str:
        return self._membership(room, user, user, "leave")

    def _membership(self, room: str, sender: str, user: str, membership: str) -> str:
        with self._cond:
            held = self.rooms[room]
            held.members = [m for m in held.members if m != user]
            held.invited = [m for m in held.invited if m != user]
            if membership == "join":
                held.members.append(user)
            elif membership == "invite":
                held.invited.append(user)
        return self.event(room, sender, "m.room.member", {"membership": membership},
                          state_key=user)

    def encrypt(self, room: str, sender: str) -> str:
        """End-to-end encryption turned on in `room` (it cannot be turned off)."""
        with self._cond:
            self.rooms[room].encrypted = True
        return self.event(room, sender, "m.room.encryption", dict(ENCRYPTION), state_key="")

    def invite(self, room: str, inviter: str, members: list[str]) -> None:
        with self._cond:
            self.rooms[room] = _Room([inviter, *members])
            self._position += 1
            self.invites.append((self._position, room, inviter))
            self._cond.notify_all()

    def fail(self, kind: str, status: int, times: int = 1, retry_after_ms: int = 500) -> None:
        body = {"errcode": "M_LIMIT_EXCEEDED" if status == 429 else "M_UNKNOWN",
                "error": "failed", "retry_after_ms": retry_after_ms}
        with self._cond:
            self._faults.setdefault(kind, []).extend([(status, body)] * times)

    def sent_to(self, room: str, kind: str = "m.room.message") -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if s.room == room and s.type == kind]

    def wait_sent(self, room: str, count: int, timeout: float = 15.0) -> list[Sent]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.sent_to(room)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.sent_to(room))} message(s) in {room}, "
                                         f"not {count}: {self.sent}")
                self._cond.wait(min(left, 0.2))
            return self.sent_to(room)

    # -- the API -------------------------------------------------------------------------

    def _handle(self, method: str, path: str, headers: Any, raw: bytes
                ) -> tuple[int, Any]:
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        found = PATH.match(parts.path)
        if found is None:
            return 404, {"errcode": "M_UNRECOGNIZED", "error": "not found"}
        token = (headers.get("Authorization") or "").removeprefix("Bearer ") or \
            query.get("access_token", [""])[0]
        if token != TOKEN:
            return 401, {"errcode": "M_UNKNOWN_TOKEN", "error": "unknown token"}
        route = found.group(1)
        body = json.loads(raw) if raw else {}
        return self._route(method, route, query, body)

    def _route(self, method: str, route: str, query: dict[str, list[str]],
               body: dict[str, Any]) -> tuple[int, Any]:
        if route == "/account/whoami":
            return 200, {"user_id": BOT, "device_id": "HEARTHDEV"}
        if route == "/sync":
            return self._sync(query)
        send = re.match(r"^/rooms/([^/]+)/send/([^/]+)/([^/]+)$", route)
        if send and method == "PUT":
            return self._send(unquote(send.group(1)), unquote(send.group(2)),
                              unquote(send.group(3)), body)
        typing = re.match(r"^/rooms/([^/]+)/typing/([^/]+)$", route)
        if typing and method == "PUT":
            with self._cond:
                self.typing.append(unquote(typing.group(1)))
            return 200, {}
        members = re.match(r"^/rooms/([^/]+)/joined_members$", route)
        if members:
            room = self.rooms.get(unquote(members.group(1)))
            return 200, {"joined": {m: {"display_name": m} for m in (room.members
                                                                      if room else [])}}
        state = re.match(r"^/rooms/([^/]+)/state(?:/([^/]+)(?:/([^/]*))?)?$", route)
        if state and method == "GET":
            return self._state(unquote(state.group(1)), state.group(2), state.group(3))
        join = re.match(r"^/(?:join|rooms)/([^/]+)(?:/join)?$", route)
        if join and method == "POST":
            return self._join(unquote(join.group(1)))
        return 404, {"errcode": "M_UNRECOGNIZED", "error": f"no route {route}"}

    def _state(self, room_id: str, kind: str | None, key: str | None) -> tuple[int, Any]:
        fault = self._fault("state")
        if fault is not None:
            return fault
        with self._cond:
            room = self.rooms.get(room_id)
            if room is None or BOT not in room.members:
                return 403, {"errcode": "M_FORBIDDEN", "error": "not in the room"}
            found = room.state()
        if kind is None:
            return 200, found
        for event in found:
            if event["type"] == unquote(kind) and event["state_key"] == unquote(key or ""):
                return 200, event["content"]
        return 404, {"errcode": "M_NOT_FOUND", "error": "Event not found."}

    def _join(self, room_id: str) -> tuple[int, dict[str, Any]]:
        with self._cond:
            room = self.rooms.get(room_id)
            joined = room is not None and BOT in room.members
        if room is not None and not joined:
            self.join(room_id, BOT)
        return 200, {"room_id": room_id}

    def _fault(self, kind: str) -> tuple[int, dict[str, Any]] | None:
        with self._cond:
            faults = self._faults.get(kind)
            return faults.pop(0) if faults else None

    def _sync(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        since_text = query.get("since", [None])[0]
        fault = self._fault("sync")
        with self._cond:
            self.syncs.append(since_text)
        if fault is not None:
            return fault
        since = int(since_text[1:]) if since_text else 0
        wait = int(query.get("timeout", ["0"])[0]) / 1000
        deadline = time.monotonic() + wait
        with self._cond:
            while since_text and self._position <= since:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    break
                self._cond.wait(min(left, 0.2))
            return 200, self._batch(since)

    def _batch(self, since: int) -> dict[str, Any]:
        join = {}
        for room_id, room in self.rooms.items():
            events = [e for position, e in room.events if position > since]
            if not events:
                continue
            join[room_id] = {
                "timeline": {"events": events, "limited": False, "prev_batch": f"s{since}"},
                "state": {"events": []}, "ephemeral": {"events": []},
                "account_data": {"events": []}, "unread_notifications": {}}
            if self.summaries:
                join[room_id]["summary"] = {"m.joined_member_count": len(room.members),
                                            "m.invited_member_count": len(room.invited)}
        invite = {room: {"invite_state": {"events": [{
            "type": "m.room.member", "state_key": BOT, "sender": inviter,
            "content": {"membership": "invite"}}]}}
            for position, room, inviter in self.invites if position > since}
        return {"next_batch": f"s{self._position}",
                "rooms": {"join": join, "invite": invite, "leave": {}},
                "presence": {"events": []}, "account_data": {"events": []},
                "to_device": {"events": []}, "device_lists": {"changed": [], "left": []},
                "device_one_time_keys_count": {}}

    def _send(self, room: str, kind: str, txn: str, content: dict[str, Any]
              ) -> tuple[int, dict[str, Any]]:
        fault = self._fault("send")
        if fault is not None:
            return fault
        with self._cond:
            again = self._txns.get((room, txn))
            if again is not None:
                return 200, {"event_id": again.event_id}
            event_id = f"$out{next(self._ids)}"
            sent = Sent(room, kind, txn, event_id, content)
            self._txns[(room, txn)] = sent
            self.sent.append(sent)
            self._position += 1
            self.rooms.setdefault(room, _Room([])).events.append((self._position, {
                "type": kind, "event_id": event_id, "sender": BOT, "content": content,
                "origin_server_ts": int(time.time() * 1000), "unsigned": {}}))
            self._cond.notify_all()
        return 200, {"event_id": event_id}
