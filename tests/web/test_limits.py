"""Request bodies are read whatever the method, so a refusal never costs the connection."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway import Gateway


@pytest.mark.process_gateway  # the race needs the server in a process of its own to show
def test_a_refused_request_with_a_body_keeps_its_connection_for_the_next(
        gateway: Gateway) -> None:
    """A GET that carries a body, refused before any route reads it, then a POST on the same
    keep-alive connection: both are answered 401 with the envelope, every time. Before, a
    GET's body was never read, so the server closed the connection after answering it, and
    the POST already sent on that connection got a reset (httpx.ReadError) about one time in
    eight instead of its answer."""
    answers = []
    for _ in range(60):
        with httpx.Client(base_url=gateway.url, timeout=10) as anonymous:
            for method in ("GET", "POST"):
                try:
                    reply = anonymous.request(method, "/api/memory", json={"text": "x"})
                except httpx.TransportError as lost:
                    answers.append((method, type(lost).__name__))
                    continue
                answers.append((method, reply.json()["error"]["code"]))
    assert answers == [("GET", "unauthorized"), ("POST", "unauthorized")] * 60
