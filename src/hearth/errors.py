"""Refusal: a request the gateway will not do, with the code, HTTP status and sentence to
answer it with. Every layer raises its own subclass; the web layer answers any of them."""

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
