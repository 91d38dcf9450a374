"""The dashboard's sign-ins as the surfaces reach them: begin one, ask whether one is still on,
end one. Kept in the store (`store.signins`), so a restart keeps every sign-in and every
sign-out. Blocking calls: a surface runs them in a thread."""

from __future__ import annotations

from hearth.store import signins as signin_store
from hearth.store.db import Database, now


def begin(db: Database, key: str, lasts_seconds: float) -> None:
    """Record a new sign-in (and forget the ones that have expired)."""
    at = now()
    with db.write() as conn:
        signin_store.prune(conn, at)
        signin_store.add(conn, key, issued_at=at, expires_at=at + lasts_seconds)


def is_on(db: Database, key: str) -> bool:
    with db.read() as conn:
        return signin_store.is_open(conn, key, now())


def end(db: Database, key: str) -> bool:
    """Sign this one out (a promise: on disk before the answer); False if it was not on."""
    with db.write() as conn:
        return signin_store.remove(conn, key)
