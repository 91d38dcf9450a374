"""A `/v1` request sent again under the same `Idempotency-Key`: a client's retry after its
answer was lost, or after the gateway serving it died mid-turn.

The client's key is scoped to the principal that sent it (`scoped`: another app's, or the
owner's, same key is another key) and kept as the message's idempotency key, so admission
admits the message once (`admission.repeat_of`; the unique (chat, key) constraint holds the
rule on every replica). A repeat is answered by the run the first request admitted, followed
to its end, never by another turn. A named chat keeps its runs, so a repeat finds its run for
as long as the chat holds the message; a stateless request's Temporary chat is found while
it stands (`LOOK_BACK`: until its request's end forgets it, or the sweep an idle one). The
same key with another message is refused: that is a client's mistake, never a retry.
"""

from __future__ import annotations

import hashlib
import time

from sqlalchemy import Connection

from hearth.engine.intake import admission
from hearth.engine.intake.admission import Admitted
from hearth.errors import Refusal
from hearth.privacy.principal import Principal
from hearth.store import transcript

PREFIX = "v1:"
LOOK_BACK = 24 * 3600.0  # how far back (seconds) a stateless request's chat is looked for


def scoped(principal: Principal, key: str) -> str:
    """The idempotency key a message is kept under for `principal`'s `key` (bounded: the
    column holds 200 characters, a client's key up to 255)."""
    digest = hashlib.sha256(f"{principal.encode()}\n{key}".encode()).hexdigest()
    return PREFIX + digest[:48]


def in_chat(conn: Connection, session_key: str, idem: str, text: str) -> Admitted | None:
    """The acknowledgement of the message `idem` names in the chat (None: none was admitted
    under it); refused when that message is not `text`."""
    found = admission.repeat_of(conn, session_key, idem)
    if found is None:
        return None
    admitted, kept = found
    if kept.content.get("text") != text:
        raise Refusal("idempotency_key_reused", 400,
                      "This Idempotency-Key was sent before with another message; a retry "
                      "sends the same request again, and a new request takes a new key.",
                      details={"param": "Idempotency-Key"})
    return admitted


def anywhere(conn: Connection, idem: str, text: str) -> Admitted | None:
    """`in_chat` for a stateless request: its Temporary chat is looked for among the chats
    active in the last `LOOK_BACK` seconds."""
    kept = transcript.with_key(conn, idem, time.time() - LOOK_BACK)
    return None if kept is None else in_chat(conn, kept.session_key, idem, text)
