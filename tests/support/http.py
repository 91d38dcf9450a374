"""Assertions on the gateway's HTTP answers: that an answer is the error envelope
`{"error": {"code", "message"}}` at its status, with its code (`error_of`: its sentence;
`error_fields`: the whole error object, for a refusal that says more than its sentence)."""

from __future__ import annotations

from typing import Any

import httpx


def error_fields(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Assert `response` is the error envelope at `status`: JSON, nothing beside "error", a code
    and a sentence (and with `code`, that code). The error object."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert list(body) == ["error"], body
    error = body["error"]
    assert isinstance(error["code"], str) and error["code"], body
    assert isinstance(error["message"], str) and error["message"].strip(), body
    if code is not None:
        assert error["code"] == code, body
    return dict(error)


def error_of(response: httpx.Response, status: int, code: str | None = None,
             *words: str) -> str:
    """Assert `response` is the error envelope at `status` (with `code`, and each of `words` in
    its sentence, as `error_fields` checks it); its sentence."""
    sentence = str(error_fields(response, status, code)["message"])
    for word in words:
        assert word in sentence, sentence
    return sentence
