"""The gateway's error envelope, read by a client: the sentence to show a person for an error
answer, and its code. The gateway writes every error as `{"error": {"code", "message"}}`
(hearth.web.http.errors); a proxy in between, or a gateway that failed before its handlers, may
answer anything else."""

from __future__ import annotations

import httpx

BODY_SHOWN = 200  # characters of a body that is not the envelope


def error_sentence(response: httpx.Response) -> str:
    """`The gateway answered <status>: <what>`, where <what> is the envelope's message; without
    the envelope, the start of the body; with an empty body too, the status's reason phrase
    ("Bad Gateway")."""
    message: object
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:BODY_SHOWN]
        if not message:
            message = response.reason_phrase
    return f"The gateway answered {response.status_code}: {message}"


def error_code(response: httpx.Response) -> str | None:
    """The envelope's `code` (`unknown_model`, `already_decided`…), None without the envelope."""
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None
