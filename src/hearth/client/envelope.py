"""The gateway's error envelope, read by a client: the sentence to show a person for an error
answer, and its code; and the one sentence every client command says when no gateway answers
at all. The gateway writes every error as `{"error": {"code", "message"}}`
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


def unreachable_sentence(base_url: str, error: Exception) -> str:
    """What a client command says when nothing answers at `base_url`: the address it tried, how
    to start the gateway, and how to point the command at one serving elsewhere."""
    return (f"Cannot reach the Hearth gateway at {base_url} ({type(error).__name__}). Start it "
            "with `hearth gateway` (or `make run`), then try again. If it serves on another "
            "port, set HEARTH_PORT to that port; on another address, give it with --url "
            "(--url http://HOST:PORT).")
