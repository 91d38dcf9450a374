"""The sign-ins aggregate: which dashboard cookies are signed in now, and the one-time links
that sign a browser in.

A sign-in's row is keyed by the hash of a cookie's random id (`web.http.signin` makes both); it
is made when the owner signs in and deleted when that page signs out. A cookie whose row is
gone, or past its `expires_at`, is not signed in, whatever its signature says.

A link's row is keyed by the hash of its code (`engine.access.signin_links` makes both); its
one use sets `used_at` in a single conditional UPDATE, so of two uses at once only one takes it.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Connection, delete, select, update

from hearth.store.schema import signin_links, signins

LinkUse = Literal["taken", "used", "expired", "unknown"]


def add(conn: Connection, key: str, *, issued_at: float, expires_at: float) -> None:
    conn.execute(signins.insert().values(key=key, issued_at=issued_at, expires_at=expires_at))


def begin(conn: Connection, key: str, *, at: float, lasts_seconds: float) -> None:
    """A new sign-in, made at `at`; the ones that have expired are forgotten first."""
    prune(conn, at)
    add(conn, key, issued_at=at, expires_at=at + lasts_seconds)


def is_open(conn: Connection, key: str, now: float) -> bool:
    """Is this sign-in still on (not signed out, not expired)?"""
    row = conn.execute(select(signins.c.expires_at).where(signins.c.key == key)).first()
    return row is not None and row.expires_at > now


def remove(conn: Connection, key: str) -> bool:
    """End this sign-in; False when it was not on."""
    return conn.execute(delete(signins).where(signins.c.key == key)).rowcount == 1


def prune(conn: Connection, now: float) -> int:
    """Forget the sign-ins that have expired; how many."""
    return conn.execute(delete(signins).where(signins.c.expires_at <= now)).rowcount


def add_link(conn: Connection, key: str, *, created_at: float, expires_at: float) -> None:
    conn.execute(signin_links.insert().values(key=key, created_at=created_at,
                                              expires_at=expires_at))


def use_link(conn: Connection, key: str, now: float) -> LinkUse:
    """Take this link's one use: `taken` when this call won it; else why not (`used` already,
    `expired`, or `unknown`: no such link, or one pruned)."""
    taken = conn.execute(update(signin_links).where(
        signin_links.c.key == key, signin_links.c.used_at.is_(None),
        signin_links.c.expires_at > now).values(used_at=now)).rowcount
    if taken == 1:
        return "taken"
    row = conn.execute(select(signin_links.c.used_at).where(signin_links.c.key == key)).first()
    if row is None:
        return "unknown"
    return "used" if row.used_at is not None else "expired"


def prune_links(conn: Connection, expired_before: float) -> int:
    """Forget the links that expired before `expired_before`, used or not; how many."""
    return conn.execute(delete(signin_links).where(
        signin_links.c.expires_at < expired_before)).rowcount
