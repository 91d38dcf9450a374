"""Following one turn at the terminal: its frames drawn as they come, the approvals it waits on
asked at the prompt, and Ctrl-C made a stop.

The chat's event stream is read on the main thread, one connection at a time, from the last
message seen (`after=`): the gateway replays what was persisted meanwhile and sends the run's
text so far, so a connection may be left at any moment and opened again without losing or
repeating anything (`RunPrinter` shows each character once). It is left to ask an approval (no
connection is held while a person thinks) and when Ctrl-C interrupts a read.

An approval is asked when an `approval` frame of this run says `pending`, and also when a
connection opens on a running turn (its `status` frame): an approval announced while no
connection was open is not replayed, so the pending ones are read from `GET /api/approvals`.

A gateway that goes away (a restart) is waited for, a few seconds, and the turn followed on
where the restart resumed it; past that, `GatewayUnavailable` says so. A restart is known by the
gateway's start id on each connection, not by a failed one: a gateway back before the next
connection is still a restart.

Ctrl-C stops the turn (`POST /api/sessions/{key}/stop`) and goes on reading until the turn
ends; a second Ctrl-C, or Ctrl-D at an approval's question, raises `Leave`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from hearth.client import approval
from hearth.client.api import GatewayApi, GatewayRefused, GatewayUnavailable
from hearth.client.printer import RunPrinter
from hearth.client.terminal import Screen

RECONNECT_PAUSE = 0.2  # seconds before opening a stream the gateway ended by itself
RECONNECT_TRIES = 30  # a gateway gone is tried again this many times…
RECONNECT_WAIT = 0.5  # …this many seconds apart
LEFT_STOPPING = "Left while the turn was stopping."


class Leave(Exception):
    """The person asked to leave the chat in the middle of a turn; the message says how."""


class TurnFollower:
    """Follows run `run_id` of chat `key`, from the message after seq `after`."""

    def __init__(self, api: GatewayApi, screen: Screen, key: str, run_id: str,
                 after: int) -> None:
        self._api = api
        self._screen = screen
        self._key = key
        self._run_id = run_id
        self._last = after
        self._printer = RunPrinter(screen, run_id)
        self._asked: set[str] = set()
        self._stopping = False
        self._lost = 0  # connections in a row that found no gateway
        self._boot = ""  # the gateway start the last connection reached

    def follow(self) -> str:
        """Until the run ends: its outcome (`complete`, `stopped`, `error`…)."""
        while True:
            try:
                step = self._watch()
                if isinstance(step, str):
                    return step
                if step is not None:
                    self._ask(step)
            except GatewayUnavailable as gone:
                self._gone(gone)
            except KeyboardInterrupt:
                try:
                    self._interrupted()
                except KeyboardInterrupt:  # a second Ctrl-C while the stop was being asked
                    raise Leave(LEFT_STOPPING) from None

    def _watch(self) -> str | dict[str, Any] | None:
        """One connection, until the run's outcome (str), an approval to ask (its view), or the
        stream's end (None: connect again)."""
        with self._api.events(self._key, self._last) as stream:
            self._reached(stream.boot)
            for frame in stream.frames:
                step = self._take(frame)
                if step is not None:
                    return step
        time.sleep(RECONNECT_PAUSE)
        return None

    def _gone(self, gone: GatewayUnavailable) -> None:
        """The gateway could not be reached: wait a moment before the next try, or give up."""
        self._lost += 1
        if self._lost > RECONNECT_TRIES:
            raise gone
        if self._lost == 1:
            self._screen.note("The gateway went away; waiting for it to come back "
                              "(Ctrl-C to stop waiting).")
        time.sleep(RECONNECT_WAIT)

    def _reached(self, boot: str) -> None:
        """A connection opened on gateway start `boot`: another start than the last one's is a
        restart, whether or not a connection failed in between (a quick restart is missed by
        the connections), and its offsets count from 0 again."""
        if self._boot and boot != self._boot:
            if not self._lost:
                self._screen.note("The gateway restarted; following the turn on.")
            self._printer.restarted()
        self._boot = boot

    def _take(self, frame: dict[str, Any]) -> str | dict[str, Any] | None:
        self._lost = 0
        kind = frame.get("type")
        if kind == "message":
            self._last = max(self._last, int(frame.get("seq", 0)))
        if kind == "status" and frame.get("run_id") == self._run_id and not self._stopping:
            return self._pending()
        if frame.get("run_id") != self._run_id:
            return None
        if kind == "delta":
            self._printer.delta(frame)
        elif kind == "message":
            self._printer.message(frame.get("message") or {})
        elif kind == "approval":
            view = frame.get("approval") or {}
            if (view.get("status") == "pending" and view.get("id") not in self._asked
                    and not self._stopping):
                return self._pending()
        elif kind == "done":
            return self._printer.done(frame)
        return None

    def _pending(self) -> dict[str, Any] | None:
        """The first approval of this run that waits and was not asked here yet (the gateway's
        list, whose views say the most: the preview, whether "always" may be given)."""
        for view in self._api.pending_approvals():
            if view.get("run_id") == self._run_id and view.get("id") not in self._asked:
                return view
        return None

    def _ask(self, view: dict[str, Any]) -> None:
        while True:
            try:
                decision = approval.decide(self._screen, view)
            except EOFError:
                raise Leave("The approval still waits: answer it on the dashboard, or here "
                            f"with `hearth chat --session {self._key}`.") from None
            try:
                self._api.answer_approval(str(view["id"]), decision)
            except GatewayRefused as refused:
                self._screen.note(str(refused))
                if decision == "allow_always" and refused.code != "already_decided":
                    view = {**view, "always_allowed": False}  # ask again, without "always"
                    continue
            else:
                self._screen.line(approval.said(decision, view))
            self._asked.add(str(view["id"]))
            return

    def _interrupted(self) -> None:
        if self._stopping:
            raise Leave(LEFT_STOPPING)
        self._stopping = True
        self._screen.note("Stopping the turn… (Ctrl-C again to leave)")
        self._api.stop(self._key)


def take_turn(api: GatewayApi, screen: Screen, key: str, text: str,
              files: tuple[str, ...] = ()) -> str:
    """Send `text` (and the uploads `files`) to chat `key` and follow the turn that answers
    it: its outcome."""
    try:
        admitted = api.send(key, text, uuid.uuid4().hex, files)
    except KeyboardInterrupt:  # while sending: the message may have been admitted
        screen.note("Stopping the turn…")
        api.stop(key)
        return "stopped"
    if admitted.get("status") == "queued":
        screen.note("(queued behind the turn already running)")
    follower = TurnFollower(api, screen, key, str(admitted["run_id"]),
                            after=int(admitted.get("seq") or 0))
    return follower.follow()
