"""Signing a webhook's body, and checking a signature: HMAC-SHA256 over the timestamp and the
body, both ways (what Hearth sends to a callback, what an app sends to Hearth).

A signed request carries two headers: `X-Hearth-Timestamp`, the unix time in whole seconds when
it was signed, and `X-Hearth-Signature`, `v1=` and the lowercase hex HMAC-SHA256, keyed with the
shared secret, of the timestamp, a dot and the raw body (`f"{timestamp}.".encode() + body`). A
timestamp more than `max_age` seconds away from now (either way) is refused, so a request
overheard cannot be sent again later. Several signatures may be given, separated by commas
(while a secret is being changed); one that matches is enough. Every comparison is constant
time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hashlib
import hmac
import re

TIMESTAMP = "X-Hearth-Timestamp"
SIGNATURE = "X-Hearth-Signature"
DELIVERY = "X-Hearth-Delivery"
VERSION = "v1"
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")


def digest(secret: str, timestamp: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of `timestamp.` + body, keyed with `secret`."""
    signed = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The `X-Hearth-Signature` value for `body` signed at `timestamp`: `v1=<hex>`."""
    return f"{VERSION}={digest(secret, str(timestamp), body)}"


def problem(secret: str, timestamp_header: str | None, signature_header: str | None,
            body: bytes, now: float, max_age: float) -> tuple[str, str] | None:
    """None when the request is signed with `secret` within `max_age` seconds of `now`; else
    the refusal's code and the sentence that says why."""
    if not timestamp_header:
        return "missing_timestamp", f"The request has no {TIMESTAMP} header."
    timestamp = timestamp_header.strip()
    if not _TIMESTAMP.match(timestamp):
        return ("bad_timestamp",
                f"{TIMESTAMP} must be the unix time in whole seconds (digits only).")
    age = now - int(timestamp)
    if age > max_age:
        return ("stale_timestamp",
                f"{TIMESTAMP} is {age:.0f} seconds old; a request is taken for "
                f"{max_age:g} seconds after it was signed (check the sender's clock).")
    if -age > max_age:
        return ("stale_timestamp",
                f"{TIMESTAMP} is {-age:.0f} seconds in the future; at most {max_age:g} "
                "seconds are allowed (check the sender's clock).")
    if not signature_header:
        return "missing_signature", f"The request has no {SIGNATURE} header."
    expected = digest(secret, timestamp, body).encode()
    for given in _signatures(signature_header):
        if hmac.compare_digest(given.encode("utf-8", "replace"), expected):
            return None
    return ("bad_signature",
            f"{SIGNATURE} does not match the body: sign '<timestamp>.<raw body>' with "
            "HMAC-SHA256 and the shared secret, and send 'v1=<hex digest>'.")


def verify(secret: str, timestamp_header: str | None, signature_header: str | None,
           body: bytes, now: float, max_age: float) -> str | None:
    """None when the request is good; else the sentence that says why it is not."""
    found = problem(secret, timestamp_header, signature_header, body, now, max_age)
    return None if found is None else found[1]


def _signatures(header: str) -> list[str]:
    """The `v1` digests in a signature header (`v1=<hex>[, v1=<hex>...]`)."""
    found = []
    for part in header.split(","):
        version, _, value = part.strip().partition("=")
        if version == VERSION and value:
            found.append(value.strip().lower())
    return found
