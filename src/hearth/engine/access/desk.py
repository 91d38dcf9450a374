"""Who acts and what they may, as the surfaces change it: `Access`, made once by the engine
with its store (`engine.access`), every method awaited on the store's seam.

- Apps (`engine.access.apps` holds their rules): make one, revoke one, find the app a token
  is, note a route refused to it, and whether it reaches a chat or a run's chat.
- Standing grants: revoking one. A revoked grant covers no call from then on: the next call
  it would have covered is asked about again (the gate reads the grants at every call).
  Revoking writes an audit row naming the grant's tool, agent and prefix; a grant never comes
  from a chat that keeps nothing (the approval desk refuses to make one), so its prefix is the
  owner's kept work, masked like every audit detail.
- The dashboard's sign-ins: begin one, ask whether one is still on, end one, or begin one by
  taking a one-time sign-in link's use (`signin_links.py`). Kept in the store
  (`store.signins`), so a restart keeps every sign-in and every sign-out.
- The audit row a change of runtime settings leaves (the Settings page's saves): what changed,
  by name (never a key, URL or prompt).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.access import apps, signin_links
from hearth.engine.views import grant_view
from hearth.errors import Refusal
from hearth.store import approvals, audit, signins as signin_store
from hearth.store.approvals import GrantRow
from hearth.store.apps import AppRow
from hearth.store.db import Database, now
from hearth.store.signins import LinkUse


class Access:
    """The owner's doors on apps, grants, sign-ins and the settings' audit."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- apps ------------------------------------------------------------------------------------

    async def make_app(self, name: str, permissions: list[str]) -> apps.Made:
        """A new app and its token (409 `app_exists` for a name taken, even by a revoked
        app)."""
        return await apps.make(self._db, name, permissions)

    async def revoke_app(self, name: str) -> AppRow:
        """Revoke the app's token: refused from the next request on (404 `app_not_found`)."""
        return await apps.revoke(self._db, name)

    async def identify(self, token: str) -> AppRow | None:
        """The app whose token this is, None for no app or a revoked one."""
        return await apps.identify(self._db, token)

    async def note_refused(self, app: str, route: str, permission: str) -> None:
        await apps.note_refused(self._db, app, route, permission)

    async def may_reach(self, app: str, *, key: str | None = None, run_id: str | None = None,
                        named: str | None = None) -> bool:
        """Whether the app started this chat and this run's chat (see `apps.may_reach`)."""
        return await apps.may_reach(self._db, app, key=key, run_id=run_id, named=named)

    # -- grants ----------------------------------------------------------------------------------

    async def revoke_grant(self, grant_id: int) -> dict[str, Any]:
        """Remove the grant `grant_id` (404 `grant_not_found`); the grant it was."""
        return grant_view(await self._db.writing(_revoke_grant, grant_id))

    # -- sign-ins --------------------------------------------------------------------------------

    async def begin_signin(self, key: str, lasts_seconds: float) -> None:
        """Record a new sign-in (and forget the ones that have expired)."""
        await self._db.writing(signin_store.begin, key, at=now(), lasts_seconds=lasts_seconds)

    async def signed_in(self, key: str) -> bool:
        """Whether this sign-in is still on (not signed out, not expired)."""
        on: bool = await self._db.reading(signin_store.is_open, key, now())
        return on

    async def signin_by_link(self, code: str, key: str, lasts_seconds: float) -> LinkUse:
        """Take the one use of the sign-in link `code` and, if this took it, begin the sign-in
        `key` in the same transaction; `taken`, else why not (`used`, `expired`, `unknown`)."""
        used: LinkUse = await self._db.writing(signin_links.use, code, key, now(),
                                               lasts_seconds)
        return used

    async def end_signin(self, key: str) -> bool:
        """Sign this one out (a promise: on disk before the answer); False if it was not on."""
        ended: bool = await self._db.writing(signin_store.remove, key)
        return ended

    # -- settings --------------------------------------------------------------------------------

    async def record_settings_change(self, what: dict[str, str]) -> None:
        """One audit row per change of runtime settings: what changed, by name."""
        await self._db.writing(audit.write, "settings.changed", actor="owner", detail=what)


def _revoke_grant(conn: Connection, grant_id: int) -> GrantRow:
    gone = approvals.revoke_grant(conn, grant_id)
    if gone is None:
        raise Refusal("grant_not_found", 404, f"There is no standing grant {grant_id}.")
    audit.write(conn, "grant.revoked", actor="owner",
                detail={"grant": gone.id, "tool": gone.tool, "agent": gone.agent,
                        "prefix": gone.prefix, "approval": gone.approval_id})
    return gone
