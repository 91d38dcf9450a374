"""Dashboard sign-in: the session cookie a page gets for the token, and its CSRF token.

The owner signs in once with the gateway's token; the answer is a cookie (HttpOnly,
SameSite=Strict) holding a random id, the time it was issued and an HMAC of both keyed by the
token, so a new token signs every page out. The id's hash (`key_of`) is kept in the store while
the sign-in is on (`engine.access`, `engine/access/desk.py`); signing out deletes it, so that
cookie is refused from then on, even if a copy of it was taken. A state-changing request
authenticated by the cookie must also carry the CSRF token (`X-CSRF-Token`, or a `csrf` form
field), an HMAC of the cookie, which only a page the gateway rendered knows; a request whose
Origin is another site is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

COOKIE = "hearth_session"
MAX_AGE = 30 * 24 * 3600  # a sign-in lasts 30 days
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _mac(token: str, purpose: str, value: str) -> str:
    key = hashlib.sha256(f"hearth-dashboard:{token}".encode()).digest()
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def issue(token: str, now: float | None = None) -> str:
    """A new cookie value for a signed-in page: `<id>.<issued>.<mac>`, the id random."""
    signed = f"{secrets.token_urlsafe(24)}.{int(now if now is not None else time.time())}"
    return f"{signed}.{_mac(token, 'session', signed)}"


def valid(token: str, cookie: str | None, now: float | None = None) -> bool:
    """Is this a cookie this token signed, not yet 30 days old? (Whether it was signed out
    since is the store's to say: see `key_of`.)"""
    if not token or not cookie or cookie.count(".") != 2:
        return False
    signed, _, mac = cookie.rpartition(".")
    issued = signed.partition(".")[2]
    if not issued.isdigit() or not hmac.compare_digest(mac, _mac(token, "session", signed)):
        return False
    age = (now if now is not None else time.time()) - int(issued)
    return 0 <= age <= MAX_AGE


def key_of(cookie: str) -> str:
    """What the store keeps of a sign-in: a hash of its cookie's id (never the id itself)."""
    return hashlib.sha256(cookie.partition(".")[0].encode()).hexdigest()


def csrf_for(token: str, cookie: str) -> str:
    """The CSRF token pages signed in with `cookie` send back with every change."""
    return _mac(token, "csrf", cookie)


def csrf_ok(token: str, cookie: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given), csrf_for(token, cookie))
