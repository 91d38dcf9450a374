"""What the engine reads of a principal (`privacy.principal`): whose a run is, whether its work
is the owner's own (the one case trust and standing grants serve), and whether it may use the
owner's memory.

Nothing here decides who is acting: a run's principal was fixed at admission and is read
from the run; a helper's report, though admitted for its chat's principal, is the helper's
words, not the owner's, so it is never the owner's own work either.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.access import apps
from hearth.privacy import principal as principals
from hearth.privacy.principal import Principal
from hearth.store import apps as app_store
from hearth.store.runs import RunRow

MEMORY_PERMISSION = "manage_memory"


def of_run(run: RunRow) -> Principal:
    """On whose behalf the run works (as stored; unreadable: a guest of nowhere)."""
    return principals.decode(run.principal)


def owners_own(stored: str, meta: dict[str, Any] | None) -> bool:
    """Whether a run of this stored principal, answering a line with this `meta`, is the
    owner's own work: the owner's, and not a helper's report."""
    return principals.decode(stored).is_owner and "helper_report" not in (meta or {})


def may_use_memory(conn: Connection, principal: Principal) -> bool:
    """The owner's work may; an app's only while it holds `manage_memory` and is not revoked;
    a guest's never."""
    if principal.is_owner:
        return True
    if principal.app is None:
        return False
    found = app_store.by_name(conn, principal.app)
    return (found is not None and found.revoked_at is None
            and apps.allows(found, MEMORY_PERMISSION))
