"""The apps aggregate: programs the owner gave a token of their own, each with the permissions
it was given. A row keeps the SHA-256 of the app's token (never the token), when it was made,
when it was last used (bookkeeping) and when it was revoked (a revoked app is kept, refused)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from hearth.store.db import now
from hearth.store.schema import apps


@dataclass(frozen=True)
class AppRow:
    name: str
    permissions: tuple[str, ...]
    created_at: float
    last_used_at: float | None
    revoked_at: float | None

    @classmethod
    def of(cls, row: Any) -> AppRow:
        m = row._mapping
        return cls(m["name"], tuple(m["permissions"] or ()), m["created_at"],
                   m["last_used_at"], m["revoked_at"])


def add(conn: Connection, name: str, token_hash: str, permissions: list[str]) -> AppRow:
    conn.execute(apps.insert().values(name=name, token_hash=token_hash,
                                      permissions=permissions, created_at=now()))
    found = by_name(conn, name)
    assert found is not None
    return found


def by_name(conn: Connection, name: str) -> AppRow | None:
    row = conn.execute(select(apps).where(apps.c.name == name)).first()
    return AppRow.of(row) if row else None


def by_hash(conn: Connection, token_hash: str) -> AppRow | None:
    """The app this token hash is, revoked or not (the caller decides)."""
    row = conn.execute(select(apps).where(apps.c.token_hash == token_hash)).first()
    return AppRow.of(row) if row else None


def listed(conn: Connection) -> list[AppRow]:
    return [AppRow.of(row) for row in conn.execute(select(apps).order_by(apps.c.name))]


def revoke(conn: Connection, name: str) -> bool:
    """Revoke the app's token; False when there is no such app or it was revoked already."""
    done = conn.execute(update(apps).where(apps.c.name == name, apps.c.revoked_at.is_(None))
                        .values(revoked_at=now()))
    return done.rowcount == 1


def used(conn: Connection, name: str, at: float) -> None:
    conn.execute(update(apps).where(apps.c.name == name).values(last_used_at=at))
