"""The sign-ins aggregate: which dashboard cookies are signed in now.

A row is keyed by the hash of a cookie's random id (`web.http.signin` makes both); it is made when
the owner signs in and deleted when that page signs out. A cookie whose row is gone, or past
its `expires_at`, is not signed in, whatever its signature says.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, select

from hearth.store.schema import signins


def add(conn: Connection, key: str, *, issued_at: float, expires_at: float) -> None:
    conn.execute(signins.insert().values(key=key, issued_at=issued_at, expires_at=expires_at))


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
