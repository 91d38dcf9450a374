"""One-time sign-in links: a browser signs in by opening one (a phone, from the QR code
`hearth token --link` prints), instead of typing the token.

A link is `<gateway>/signin/link/<code>`: the code is random (128 bits), shown once and never
kept; the store keeps its hash (`key_of`) with when it was made and when it expires
(`LINK_SECONDS` later). `hearth token --link` makes one straight in the store (`make`, through
`engine.compose`), since the CLI and the gateway are separate processes sharing it. Opening it
takes its one use (`use`): in the same transaction the conditional UPDATE that only one use
can win, and the dashboard's sign-in that the token's form would have begun. Links are pruned
`KEPT_SECONDS` after they expire, used or not, whenever one is made or used, so a late opener
is told "expired" rather than "unknown" for a while, and the table never grows.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from sqlalchemy import Connection

from hearth.store import signins as signin_store
from hearth.store.signins import LinkUse

LINK_SECONDS = 10 * 60  # a link signs in within 10 minutes of being made, or never
KEPT_SECONDS = 60 * 60  # how long an expired or used link's row stays to say so
CODE_BYTES = 16
CODE_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,64}")  # what a code looks like (token_urlsafe)


def new_code() -> str:
    return secrets.token_urlsafe(CODE_BYTES)


def key_of(code: str) -> str:
    """What the store keeps of a link: a hash of its code (never the code itself)."""
    return hashlib.sha256(f"hearth-signin-link:{code}".encode()).hexdigest()


def make(conn: Connection, at: float) -> str:
    """A new link's code, made at `at` (its hash kept until it expires; older ones pruned)."""
    signin_store.prune_links(conn, at - KEPT_SECONDS)
    code = new_code()
    signin_store.add_link(conn, key_of(code), created_at=at, expires_at=at + LINK_SECONDS)
    return code


def use(conn: Connection, code: str, signin_key: str, at: float,
        lasts_seconds: float) -> LinkUse:
    """Take the link's one use at `at` and, when this call took it, begin the sign-in
    `signin_key` (lasting `lasts_seconds`); what became of the link. A code of another shape
    is `unknown`, without asking the store."""
    if not CODE_SHAPE.fullmatch(code):
        return "unknown"
    signin_store.prune_links(conn, at - KEPT_SECONDS)
    used = signin_store.use_link(conn, key_of(code), at)
    if used == "taken":
        signin_store.begin(conn, signin_key, at=at, lasts_seconds=lasts_seconds)
    return used
