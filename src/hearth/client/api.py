"""The gateway's HTTP API as the terminal chat calls it: chats, messages, stops, approvals,
branching (regenerate, edit, rewind, variants, fork), and one chat's event stream (Server-Sent
Events, decoded to frames); and chats exported and imported as JSON Lines (`hearth export`,
`hearth import`).

Every refusal becomes `GatewayRefused` carrying the gateway's own sentence, and a gateway that
cannot be reached becomes `GatewayUnavailable` saying how to start it; nothing here prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from hearth.client.envelope import error_code, error_sentence, unreachable_sentence

JSON = dict[str, Any]
CALL_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
IMPORT_TIMEOUT = 300.0  # a part of an import is written before it is answered


class GatewayError(Exception):
    """A request the gateway did not answer as asked; the message is a sentence to show."""


class GatewayUnavailable(GatewayError):
    """The gateway could not be reached; the message says how to start it."""


class GatewayRefused(GatewayError):
    """The gateway answered an error: its status, its code and its sentence, and the error's
    other fields (`details`: the steps and confirm value of `retry_repeats_steps`)."""

    def __init__(self, sentence: str, status: int, code: str | None,
                 details: JSON | None = None) -> None:
        super().__init__(sentence)
        self.status = status
        self.code = code
        self.details = details or {}


def _path(key: str) -> str:
    return f"/api/sessions/{quote(key, safe='')}"


@dataclass(frozen=True)
class Download:
    """A file the gateway sends: the name it gives it, and its bytes as they come."""

    filename: str | None
    chunks: Iterator[bytes]


@dataclass(frozen=True)
class EventStream:
    """One open connection to a chat's events: the gateway start it reached, and its frames."""

    boot: str
    frames: Iterator[JSON]


class GatewayApi:
    """A client of one gateway, signed in with its token."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers,
                                  timeout=httpx.Timeout(CALL_TIMEOUT, connect=CONNECT_TIMEOUT))

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ chats

    def check(self) -> None:
        """The gateway answers and takes the token (GatewayError saying why not)."""
        self._call("GET", "/api/sessions", params={"limit": 1})

    def find_chat(self, key: str, limit: int = 1) -> JSON | None:
        """The chat and its last `limit` messages (`GET /api/sessions/{key}`); None if there is
        no such chat."""
        try:
            return self._call("GET", _path(key), params={"limit": limit})
        except GatewayRefused as error:
            if error.status == 404:
                return None
            raise

    def create_chat(self, name: str | None, model: str | None) -> JSON:
        """Make the chat (or open the kept chat of that name): its view."""
        body = {k: v for k, v in (("name", name), ("model", model)) if v is not None}
        return self._call("POST", "/api/sessions", json=body)

    def set_model(self, key: str, model: str) -> JSON:
        return self._call("PATCH", _path(key), json={"model": model})

    def send(self, key: str, text: str, client_message_id: str,
             files: tuple[str, ...] = ()) -> JSON:
        """Admit a message (with `files`: uploads to the chat it sends): `{run_id, status}`."""
        body: JSON = {"text": text, "client_message_id": client_message_id}
        if files:
            body["attachments"] = list(files)
        return self._call("POST", f"{_path(key)}/messages", json=body)

    def upload(self, key: str, path: Path) -> JSON:
        """Upload the file at `path` to the chat (streamed, not read whole): its view."""
        with path.open("rb") as file:
            return self._call("POST", f"{_path(key)}/attachments",
                              params={"name": path.name}, content=file)

    def stop(self, key: str) -> str | None:
        """Stop the chat's running turn: the run stopped, or None when none was running."""
        stopped = self._call("POST", f"{_path(key)}/stop").get("stopped")
        return str(stopped) if stopped else None

    def compact(self, key: str) -> str:
        """Compact what the chat's model reads now: the sentence saying what happened."""
        return str(self._call("POST", f"{_path(key)}/compact").get("sentence", ""))

    # ------------------------------------------------------------------ branching

    def regenerate(self, key: str, index: int | None, confirm: str | None) -> JSON:
        """Answer the answer at `index` (None: the last) again: `{run_id, status, seq}`."""
        return self._call("POST", f"{_path(key)}/regenerate",
                          json=_given(index=index, confirm=confirm))

    def edit(self, key: str, index: int, text: str, confirm: str | None) -> JSON:
        """Send `text` in place of your message at `index`: `{run_id, status, seq}`."""
        return self._call("POST", f"{_path(key)}/edit",
                          json=_given(index=index, text=text, confirm=confirm))

    def rewind(self, key: str, index: int, confirm: str | None) -> JSON:
        """Move the chat back to the message at `index`: `{head_index, run_id}` (a run when
        that message is yours and is answered again)."""
        return self._call("POST", f"{_path(key)}/rewind",
                          json=_given(index=index, confirm=confirm))

    def choose_variant(self, key: str, index: int, variant: int) -> JSON:
        """Show variant `variant` (from 0) of the message at `index`."""
        return self._call("POST", f"{_path(key)}/variant",
                          json={"index": index, "variant": variant})

    def fork(self, key: str, index: int) -> JSON:
        """A new chat with this one's messages up to `index`: `{key, session}`."""
        return self._call("POST", f"{_path(key)}/fork", json={"index": index})

    # ------------------------------------------------------------------ export and import

    @contextmanager
    def export(self, key: str | None) -> Iterator[Download]:
        """One chat's JSON Lines (`key`), or every kept chat's (None), as the gateway sends
        them: the file's name and its bytes as they come, on a connection of its own."""
        path, params = ("/api/export", {}) if key is None else (
            f"{_path(key)}/export", {"format": "jsonl"})
        stream = httpx.Client(base_url=self.base_url, headers=self._headers,
                              timeout=httpx.Timeout(CALL_TIMEOUT, connect=CONNECT_TIMEOUT))
        try:
            with stream.stream("GET", path, params=params) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    raise _refused(answer)
                yield Download(_filename(answer), answer.iter_bytes())
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        finally:
            stream.close()

    def import_part(self, body: bytes, *, dry_run: bool, line_offset: int) -> JSON:
        """Import JSON Lines (`POST /api/import`), or only check them (`dry_run`): the
        gateway's answer, `{"chats": N, "imported": [...]}`."""
        return self._call("POST", "/api/import", content=body,
                          params={"dry_run": "true" if dry_run else "false",
                                  "line_offset": line_offset},
                          headers={"Content-Type": "application/x-ndjson"},
                          timeout=httpx.Timeout(IMPORT_TIMEOUT, connect=CONNECT_TIMEOUT))

    def prompts(self) -> list[JSON]:
        """The saved prompts a message can start with (`@name`): name, description,
        placeholders."""
        return list(self._call("GET", "/api/prompts").get("prompts", []))

    # ------------------------------------------------------------------ approvals

    def pending_approvals(self) -> list[JSON]:
        return list(self._call("GET", "/api/approvals").get("approvals", []))

    def answer_approval(self, approval_id: str, decision: str) -> JSON:
        return self._call("POST", f"/api/approvals/{quote(approval_id, safe='')}",
                          json={"decision": decision})

    # ------------------------------------------------------------------ events

    @contextmanager
    def events(self, key: str, after: int) -> Iterator[EventStream]:
        """The chat's frames after seq `after`, on a connection of its own (so that a stream
        left in the middle, by Ctrl-C, leaves nothing half-read on the calls' connections).
        The stream is subscribed when this is entered."""
        stream = httpx.Client(base_url=self.base_url, headers=self._headers,
                              timeout=httpx.Timeout(CALL_TIMEOUT, connect=CONNECT_TIMEOUT,
                                                    read=None))
        try:
            with stream.stream("GET", f"{_path(key)}/events", params={"after": after}) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    raise _refused(answer)
                yield EventStream(answer.headers.get("x-hearth-boot", ""),
                                  _frames(answer.iter_lines()))
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        finally:
            stream.close()

    # ------------------------------------------------------------------ the calls

    def _call(self, method: str, path: str, **kwargs: Any) -> JSON:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        if answer.status_code >= 400:
            raise _refused(answer)
        body = answer.json()
        return body if isinstance(body, dict) else {}

    def _unreachable(self, error: httpx.TransportError) -> GatewayUnavailable:
        return GatewayUnavailable(unreachable_sentence(self.base_url, error))


def _refused(answer: httpx.Response) -> GatewayRefused:
    return GatewayRefused(error_sentence(answer), answer.status_code, error_code(answer),
                          _error_details(answer))


def _error_details(answer: httpx.Response) -> JSON:
    """The error object's fields besides its code and message (none without the envelope)."""
    try:
        error = answer.json()["error"]
    except (ValueError, KeyError, TypeError):
        return {}
    if not isinstance(error, dict):
        return {}
    return {k: v for k, v in error.items() if k not in ("code", "message")}


def _given(**fields: Any) -> JSON:
    return {k: v for k, v in fields.items() if v is not None}


def _filename(answer: httpx.Response) -> str | None:
    """The file name a download's Content-Disposition gives, if any."""
    found = re.search(r'filename="([^"/\\]+)"', answer.headers.get("content-disposition", ""))
    return found.group(1) if found else None


def _frames(lines: Iterator[str]) -> Iterator[JSON]:
    for line in lines:
        if line.startswith("data: "):
            frame = json.loads(line[6:])
            if isinstance(frame, dict):
                yield frame
