"""Refusal: a request the gateway will not do, with the code, HTTP status and sentence to
answer it with. Every layer raises its own subclass; the web layer answers any of them.

The engine's refusals carry HTTP statuses, not kinds for the web layer to map: every surface
of the gateway speaks HTTP (the dashboard, the API, and `hearth chat` and `hearth mcp`, which
are HTTP clients of it), so the status is the one vocabulary of kinds they all share (404 no
such thing, 409 not in this state, 422 not a valid request, 503 not now). A second table
mapping kinds to statuses would be a second owner of the same fact. The web layer adds
nothing: it writes the refusal into the error envelope as it is. Failures that are not
refusals (a bug, the store failing) are never Refusals; they are answered 500 with a
sentence that carries no message text.
"""

from __future__ import annotations

from typing import Any


class Refusal(Exception):
    def __init__(self, code: str, status: int, sentence: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(sentence)
        self.code = code
        self.status = status
        self.sentence = sentence
        self.details = details or {}  # more fields for the error object (e.g. steps, confirm)


class Limited(Refusal):
    """A refusal for now: past a quota or a reserve, the same request may be taken again
    `retry_after` seconds from now (answered with a `Retry-After` header; None: no time can
    be said, something must change first)."""

    def __init__(self, code: str, status: int, sentence: str,
                 retry_after: int | None = None) -> None:
        super().__init__(code, status, sentence)
        self.retry_after = retry_after
