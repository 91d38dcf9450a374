"""Dashboard sign-in: the session cookie a page gets for the token, and its CSRF token.

The owner signs in once with the gateway's token; the answer is a cookie (HttpOnly,
SameSite=Strict) holding the time it was issued and an HMAC of it keyed by the token, so a new
token signs every page out. A state-changing request authenticated by the cookie must also
carry the CSRF token (`X-CSRF-Token`, or a `csrf` form field), an HMAC of the cookie, which
only a page the gateway rendered knows; a request whose Origin is another site is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import time

COOKIE = "hearth_session"
MAX_AGE = 30 * 24 * 3600  # a sign-in lasts 30 days
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _mac(token: str, purpose: str, value: str) -> str:
    key = hashlib.sha256(f"hearth-dashboard:{token}".encode()).digest()
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def issue(token: str, now: float | None = None) -> str:
    """A new cookie value for a signed-in page."""
    issued = str(int(now if now is not None else time.time()))
    return f"{issued}.{_mac(token, 'session', issued)}"


def valid(token: str, cookie: str | None, now: float | None = None) -> bool:
    if not token or not cookie or "." not in cookie:
        return False
    issued, _, mac = cookie.partition(".")
    if not issued.isdigit() or not hmac.compare_digest(mac, _mac(token, "session", issued)):
        return False
    age = (now if now is not None else time.time()) - int(issued)
    return 0 <= age <= MAX_AGE


def csrf_for(token: str, cookie: str) -> str:
    """The CSRF token pages signed in with `cookie` send back with every change."""
    return _mac(token, "csrf", cookie)


def csrf_ok(token: str, cookie: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given), csrf_for(token, cookie))
