"""The audit log: who decided what, when. Rows never carry message text or secrets: what a
caller puts in `detail` is masked before it is written."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.masking import mask_value
from hearth.store.db import now
from hearth.store.schema import audit


def write(
    conn: Connection,
    action: str,
    *,
    actor: str,
    session_key: str | None = None,
    run_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        audit.insert().values(
            at=now(),
            action=action,
            actor=actor,
            session_key=session_key,
            run_id=run_id,
            detail=mask_value(detail or {}),
        )
    )
