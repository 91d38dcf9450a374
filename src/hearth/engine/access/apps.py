"""Apps: programs the owner gives a token of their own (`hearth apps add`), each with the
permissions it was given, and what decides an app's reach.

A token is `hearth_app_<random>`, shown once when it is made and kept only as its SHA-256.
`identify` finds the app a token is on every request (one indexed read; revoking takes effect
at the next request, nothing is cached) and notes its last use as bookkeeping, at most once a
minute. An app reaches only the chats it started (`sessions.created_by_app`): `may_reach` is
the one answer to "is this chat, or this run's chat, the app's?"."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import Connection

from hearth.errors import Refusal
from hearth.store import apps as app_store, audit, runs as run_store, sessions as session_store
from hearth.store.apps import AppRow
from hearth.store.db import Database, now

PERMISSIONS = ("read_chats", "send_messages", "manage_memory", "run_jobs", "choose_folders",
               "admin")
FOLDERS = "choose_folders"  # a chat's own `workspace_dir`, not the gateway's workspace
ADMIN = "admin"  # every permission, managing apps among them
TOKEN_PREFIX = "hearth_app_"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
USE_NOTED_EVERY = 60.0  # seconds between two notes of an app's last use


@dataclass(frozen=True)
class Made:
    app: AppRow
    token: str  # shown once, never kept


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def allows(app: AppRow, permission: str) -> bool:
    return ADMIN in app.permissions or permission in app.permissions


def checked(name: str, permissions: list[str]) -> list[str]:
    """The permissions, in the table's order, for a valid name (422 otherwise)."""
    if not NAME_PATTERN.match(name):
        raise Refusal("invalid_app_name", 422,
                      "An app's name is 1 to 100 letters, digits, '.', '_' or '-', starting with "
                      "a letter or digit.")
    unknown = [p for p in permissions if p not in PERMISSIONS]
    if unknown or not permissions:
        raise Refusal("invalid_permissions", 422,
                      f"Give an app one or more of: {', '.join(PERMISSIONS)}"
                      + (f" ({unknown[0][:50]!r} is not one)." if unknown else "."))
    return [p for p in PERMISSIONS if p in permissions]


async def make(db: Database, name: str, permissions: list[str]) -> Made:
    """A new app and its token (409 `app_exists` for a name taken, even by a revoked app)."""
    given = checked(name, permissions)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return Made(await db.writing(_make, name, token_hash(token), given), token)


def _make(conn: Connection, name: str, hashed: str, permissions: list[str]) -> AppRow:
    if app_store.by_name(conn, name) is not None:
        raise Refusal("app_exists", 409,
                      f"There is an app named {name!r} already (revoked apps keep their "
                      "names); choose another name.")
    made = app_store.add(conn, name, hashed, permissions)
    audit.write(conn, "app.add", actor="owner", detail={"app": name, "permissions": permissions})
    return made


async def listed(db: Database) -> list[AppRow]:
    return await db.reading(app_store.listed)


async def revoke(db: Database, name: str) -> AppRow:
    """Revoke the app's token: refused from the next request on (404 `app_not_found`)."""
    return await db.writing(_revoke, name)


def _revoke(conn: Connection, name: str) -> AppRow:
    app_store.revoke(conn, name)
    found = app_store.by_name(conn, name)
    if found is None:
        raise Refusal("app_not_found", 404, f"There is no app named {name[:100]!r}.")
    audit.write(conn, "app.revoke", actor="owner", detail={"app": name})
    return found


async def identify(db: Database, token: str) -> AppRow | None:
    """The app whose token this is, None for no app or a revoked one."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    app = await db.reading(app_store.by_hash, token_hash(token))
    if app is None or app.revoked_at is not None:
        return None
    at = now()
    if app.last_used_at is None or at - app.last_used_at >= USE_NOTED_EVERY:
        await db.writing(app_store.used, app.name, at, durable=False)
    return app


def check_folder(app: AppRow | None, workspace_dir: str | None) -> None:
    """An app's chats work in the gateway's workspace: naming a folder of its own needs
    `choose_folders` (403 `app_scope` otherwise)."""
    if app is None or workspace_dir is None or allows(app, FOLDERS):
        return
    raise Refusal("app_scope", 403,
                  f"The app {app.name!r} may not choose the folder a chat works in (its chats "
                  f"work in the gateway's workspace); that needs the {FOLDERS!r} permission "
                  f"(`hearth apps add {app.name} --allow {FOLDERS}` gives it to a new token).")


async def may_reach(db: Database, app: str, *, key: str | None = None,
                    run_id: str | None = None, named: str | None = None) -> bool:
    """Whether the app started this chat and this run's chat; `named` (a chat a request is
    made as, which may be made by it) may also be a chat not there yet."""
    return await db.reading(_reaches, app, key, run_id, named)


def _reaches(conn: Connection, app: str, key: str | None, run_id: str | None,
             named: str | None) -> bool:
    if named is not None and not session_store.exists(conn, named):
        named = None
    keys = [each for each in (key, named) if each is not None]
    if run_id is not None:
        run = run_store.get(conn, run_id)
        if run is None:
            return False
        keys.append(run.session_key)
    for each in keys:
        row = session_store.get(conn, each)
        if row is None or row.created_by_app != app:
            return False
    return True


def refused(conn: Connection, app: str, route: str, permission: str) -> None:
    """The audit row of an app refused a route outside its permissions (no body, no text)."""
    audit.write(conn, "app.refused", actor=f"app:{app}",
                detail={"app": app, "route": route, "permission": permission})


async def note_refused(db: Database, app: str, route: str, permission: str) -> None:
    await db.writing(refused, app, route, permission)
App = AppRow  # what the surfaces are handed of an app


async def own_keys(db: Database, app: str, keys: set[str]) -> set[str]:
    """Which of these chats the app started (what a list shows an app of itself)."""
    return await db.reading(_own, app, keys)


def _own(conn: Connection, app: str, keys: set[str]) -> set[str]:
    found = (session_store.get(conn, key) for key in keys)
    return {row.key for row in found if row is not None and row.created_by_app == app}
