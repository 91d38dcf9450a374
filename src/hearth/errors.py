"""Refusal: a request the gateway will not do, with the code, HTTP status and sentence to
answer it with. Every layer raises its own subclass; the web layer answers any of them."""

from __future__ import annotations


class Refusal(Exception):
    def __init__(self, code: str, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.status = status
        self.sentence = sentence
