"""The terminal chat's client: opens a chat, sends a message, prints its answer as it streams.

It speaks only the public HTTP API (sessions, messages, SSE events), like any other client.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, TextIO

import httpx

from hearth.client.envelope import error_sentence


class GatewayUnavailable(Exception):
    """The gateway could not be reached or refused the request; the message says what to do."""


class ChatClient:
    def __init__(self, base_url: str, token: str, timeout: float = 30.0) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})
        self.base_url = base_url

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise GatewayUnavailable(
                f"Cannot reach the gateway at {self.base_url} ({type(error).__name__}). "
                "Start it with `hearth gateway` (or `make run`)."
            ) from error
        if response.status_code >= 400:
            raise GatewayUnavailable(error_sentence(response))
        return response

    def open(self, name: str | None) -> str:
        body = {"name": name} if name else {}
        return str(self._call("POST", "/api/sessions", json=body).json()["key"])

    def say(self, key: str, text: str, out: TextIO) -> bool:
        """Send `text` and stream the answer to `out`. True when the turn completed."""
        last = int(self._call("GET", f"/api/sessions/{key}", params={"limit": 1})
                   .json()["session"]["last_seq"])
        with self._stream(key, last) as frames:
            admitted = self._call("POST", f"/api/sessions/{key}/messages",
                                  json={"text": text, "client_message_id": uuid.uuid4().hex})
            run_id = admitted.json()["run_id"]
            if admitted.json()["status"] == "queued":
                out.write("(queued behind the turn already running)\n")
            return _print_run(frames, run_id, out)

    def _stream(self, key: str, after: int) -> _Frames:
        return _Frames(self._http, key, after)


class _Frames:
    """A context manager over one SSE connection, yielding decoded frames."""

    def __init__(self, http: httpx.Client, key: str, after: int) -> None:
        self._cm = http.stream("GET", f"/api/sessions/{key}/events", params={"after": after},
                               timeout=httpx.Timeout(30.0, read=None))

    def __enter__(self) -> Iterator[dict[str, Any]]:
        try:
            response = self._cm.__enter__()
        except httpx.TransportError as error:
            raise GatewayUnavailable(f"Cannot reach the gateway ({type(error).__name__}).") \
                from error
        return _decode(response.iter_lines())

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)


def _decode(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line[6:])


def _print_run(frames: Iterator[dict[str, Any]], run_id: str, out: TextIO) -> bool:
    streamed = False
    for frame in frames:
        if frame.get("run_id") != run_id:
            continue
        kind = frame["type"]
        if kind == "delta":
            out.write(frame["text"])
            out.flush()
            streamed = True
        elif kind == "message":
            message = frame["message"]
            if message["kind"] == "tool_result":
                receipt = message["meta"].get("receipt")
                if receipt:
                    out.write(f"\n  · {receipt}\n" if streamed else f"  · {receipt}\n")
                    streamed = False
            elif message["kind"] == "assistant" and streamed:
                out.write("\n")
                streamed = False
        elif kind == "done":
            if streamed:
                out.write("\n")
            if frame["outcome"] != "complete":
                out.write(f"[{frame['ending']}] {frame['sentence']}\n")
            out.flush()
            return bool(frame["outcome"] == "complete")
    return False
