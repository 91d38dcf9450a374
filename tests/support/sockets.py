"""Raw HTTP/1.1 over a socket, for the tests of what a half-sent or unwanted request gets: a
connection (`connect`), everything until the server closes it (`until_closed`), one whole
answer however its parts arrive (`one_answer`), and an answer taken apart (`parsed`)."""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def until_closed(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took;
    fails if it is still open after `within` seconds."""
    begun = time.monotonic()
    got = b""
    sock.settimeout(0.1)
    while time.monotonic() - begun < within:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return got, time.monotonic() - begun
        if not data:
            return got, time.monotonic() - begun
        got += data
    raise AssertionError(f"still open after {within} s; got {got!r}")


def one_answer(sock: socket.socket, within: float = 5.0) -> bytes:
    """One whole response (its head, and its body by Content-Length), however it arrives;
    fails if it has not all come within `within` seconds."""
    sock.settimeout(within)
    got = b""
    while b"\r\n\r\n" not in got:
        got += _more(sock)
    head, _, body = got.partition(b"\r\n\r\n")
    length = re.search(rb"content-length: *(\d+)", head, re.I)
    assert length is not None, head
    while len(body) < int(length.group(1)):
        body += _more(sock)
    return head + b"\r\n\r\n" + body


def _more(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    assert data, "the connection was closed"
    return data


@dataclass(frozen=True)
class Answer:
    """An HTTP answer taken apart: its status, its headers (lower-cased names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def parsed(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]), headers, body)
