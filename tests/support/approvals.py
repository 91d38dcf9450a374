"""Waiting for a turn to ask: `pending_approvals` polls GET /api/approvals until the approvals
asked for are pending (of one chat, or of any), `pending_in` hands back the one a chat's call
waits on."""

from __future__ import annotations

from typing import Any

from tests.gateway import Api
from tests.support.polling import until


def pending_approvals(api: Api, key: str | None = None, count: int = 1,
                      timeout: float = 15) -> list[dict[str, Any]]:
    """Wait until at least `count` approvals are pending (those of chat `key`, or of any chat);
    the list GET /api/approvals answers, in its order."""

    def listed() -> list[dict[str, Any]]:
        answer = api.http.get("/api/approvals")
        assert answer.status_code == 200, answer.text
        found = [dict(a) for a in answer.json()["approvals"]
                 if key is None or a["session"] == key]
        return found if len(found) >= count else []

    where = f" in chat {key}" if key else ""
    return until(listed, timeout, what=f"{count} approval(s) asked{where}")


def pending_in(api: Api, key: str, timeout: float = 15) -> dict[str, Any]:
    """The approval a call of chat `key` waits on (the first listed, when several do)."""
    return pending_approvals(api, key, timeout=timeout)[0]
