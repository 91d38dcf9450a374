"""The repeat guard: before a door runs a turn again, it asks whether that would repeat a step
that may already have changed something.

It reads the attempt's receipts in the ledger: every call that may have changed something (not
read-only) and that began (finished, failed, or unknown — a failed call may have acted before it
failed). When there are any, the door runs nothing and answers 409 `retry_repeats_steps` with
those steps and a `confirm` value; the same request with that value is the owner's yes. Calls
refused or denied before they ran are not asked about.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection

from hearth.errors import Refusal
from hearth.store import audit, ledger, runs
from hearth.store.db import Database
from hearth.store.ledger import CallRow

BEGAN = ("finished", "failed", "unknown")


async def steps_that_may_repeat(db: Database, run_id: str) -> list[CallRow]:
    calls = await db.reading(ledger.for_run, run_id)
    return [c for c in calls if c.effect != "reads" and c.status in BEGAN]


def confirm_value(run_id: str, steps: list[CallRow]) -> str:
    """A value only this question has: a yes to it is no yes to another."""
    material = run_id + "|" + "|".join(f"{s.call_id}:{s.status}" for s in steps)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


async def ask_first(db: Database, run_id: str, confirm: str | None, *, door: str) -> None:
    """Raise the 409 question unless nothing may repeat or `confirm` answers it. The question
    and the yes are audited under `door` (`chat.regenerate`, `chat.rewind`…), naming each step
    by its tool and call id (never its arguments, which may quote the chat)."""
    steps = await steps_that_may_repeat(db, run_id)
    if not steps:
        return
    named = [{"tool": s.tool, "call_id": s.call_id, "status": s.status} for s in steps]
    if confirm == confirm_value(run_id, steps):
        await db.writing(_audited, door, run_id, {"outcome": "allowed", "confirmed": True,
                                                  "steps": named})
        return
    await db.writing(_audited, door, run_id, {"outcome": "needs_confirm", "steps": named})
    noun = "step" if len(steps) == 1 else "steps"
    raise Refusal(
        "retry_repeats_steps", 409,
        f"Running this turn again may repeat {len(steps)} {noun} that may already have "
        "changed something. Send the request again with this confirm value to go ahead.",
        details={"steps": [_step(s) for s in steps], "confirm": confirm_value(run_id, steps)},
    )


def _audited(conn: Connection, door: str, run_id: str, detail: dict[str, Any]) -> None:
    run = runs.get(conn, run_id)
    audit.write(conn, door, actor="owner", session_key=run.session_key if run else None,
                run_id=run_id, detail=detail)


def _step(call: CallRow) -> dict[str, Any]:
    target = next((call.arguments.get(k) for k in ("path", "command", "url")
                   if isinstance(call.arguments.get(k), str)), None)
    return {"tool": call.tool, "target": target, "status": call.status,
            "receipt": call.receipt}
