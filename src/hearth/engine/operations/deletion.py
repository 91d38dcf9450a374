"""Deleting a chat, and the end of a Temporary chat.

A chat is deleted in one order: it takes no new message (`deleting`), its queued runs turn
stale, its running turn is stopped, its approvals still waiting on the owner are cancelled (so
the calls waiting on them wake), what was running is waited for (a few seconds at most), then
the store and the disk are purged (`sessions.forget`) with what memory holds filed under that
chat alone; last the session row goes. Each deletion writes exactly one `chat.deleted` audit
row naming the chat: outcome, counts, why, and the reason when it failed — never message
text. Last the store's write-ahead log is folded in and truncated (`Database.truncate_wal`):
with `secure_delete` on every connection, no byte of the chat's text is left in the database
file or its `-wal` once the deletion returns, a kill -9 right after it included.

A Temporary chat ends forgotten the same way: when a new
process starts (what a crash left), when the gateway stops, and when it has been idle past
`limits.temporary_idle_seconds` (the sweeper, which reads and waits on the `Clock` it is
given).

A restricted chat (any mode but persistent, `privacy.modes.restricted`) takes its helpers with
it, all the way down (helpers of helpers): once its own turn is stopped, each helper's chat is
deleted the same way, first, as a deletion of its own (its turn stopped, its own helpers
gone, its audit row); then the chat's turn is stopped again (a report of a helper that
finished meanwhile may have started one) until no helper is left. A helper that could not be
removed keeps the chat (deleting it again finishes both). A persistent chat's helpers stay:
they are kept chats of their own, which the owner can open and delete; their `parent_key`
names a chat that is gone, so their reports go nowhere. The report counts the helper chats
that went (`removed.helpers`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from hearth.clock import Clock, SystemClock
from hearth.engine.delivery.events import Bus
from hearth.engine.turn.approval.desk import ApprovalDesk
from hearth.errors import Refusal
from hearth.memory.service import Memory
from hearth.privacy.modes import mode_of, restricted
from hearth.sessions import forget
from hearth.sessions.forget import Purge
from hearth.store import audit
from hearth.store.db import Database

log = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 5.0  # how long a deletion waits for the chat's stopped turn to end
STOP_TICK_SECONDS = 0.1
HELPER_ROUNDS = 5  # how often a deletion looks again for helpers started while it ran
WHY = ("deleted", "temporary_ended", "idle", "restart")


class ChatChores(Protocol):
    """What a deletion needs of the background chores: the chat's own cancelled."""

    async def cancel_for(self, session_key: str) -> None: ...


class ChatOwner(Protocol):
    """What a deletion needs of the engine."""

    db: Database
    bus: Bus
    desk: ApprovalDesk
    memory: Memory
    chats_dir: Path
    deleting: set[str]  # chats being deleted: they take no new message

    @property
    def chores(self) -> ChatChores: ...

    async def stop(self, session_key: str) -> str | None: ...

    def forget_context(self, session_key: str) -> None: ...


@dataclass(frozen=True)
class DeleteReport:
    key: str
    deleted: bool
    removed: dict[str, int | bool]  # messages, runs, tool_calls, approvals, memory_items,
    #                                 folder, helpers (helper chats that went with it)
    why: str
    reason: str | None = None  # what could not be removed, when the chat is still kept

    def view(self) -> dict[str, Any]:
        return {"deleted": self.deleted, "key": self.key, "removed": self.removed}


async def delete_chat(owner: ChatOwner, key: str, why: str = "deleted") -> DeleteReport:
    """Delete the chat; 404 `session_not_found`, or 409 `session_not_deleted` when a part
    could not be removed (the chat is still kept; deleting it again can finish)."""
    if key in owner.deleting:
        raise Refusal("session_deleting", 409, f"Chat {key!r} is being deleted already.")
    report = await end_chat(owner, key, why, stop_running=True)
    if report is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {key!r}.")
    if not report.deleted:
        raise Refusal("session_not_deleted", 409,
                      f"Chat {key!r} was not deleted: {report.reason}. The chat is still kept; "
                      "delete it again to finish.", details={"removed": report.removed})
    return report


async def end_chat(owner: ChatOwner, key: str, why: str, *, stop_running: bool,
                   idle_before: float | None = None) -> DeleteReport | None:
    """Delete the chat (None when there is none, or, with `idle_before`, when it is no longer
    idle). `stop_running=False` where nothing of this process can be running in it."""
    if why not in WHY:
        raise ValueError(f"unknown reason {why!r}")
    if key in owner.deleting:
        return None
    owner.deleting.add(key)  # from here on, no message is admitted to it
    try:
        report = await _forget_chat(owner, key, why, stop_running, idle_before)
    finally:
        owner.deleting.discard(key)
        owner.forget_context(key)  # nothing of it stays in the context cache
    if report is not None:  # the chat is gone: a message to it now finds no chat (404)
        await owner.db.writing(_audit, report)
        await asyncio.to_thread(owner.db.truncate_wal)  # no old frame keeps its text
    return report


@dataclass
class HelpersGone:
    """What deleting a chat's helpers did: how many chats went, what could not go."""

    count: int = 0
    failures: list[str] = field(default_factory=list)


async def _forget_chat(owner: ChatOwner, key: str, why: str, stop_running: bool,
                       idle_before: float | None) -> DeleteReport | None:
    # the writer takes this after every message admitted before the `deleting` mark (those
    # were queued before it), so one sent to an idle chat keeps it; later ones are refused
    session = await owner.db.writing(forget.begin, key, idle_before)
    if session is None:
        return None
    if stop_running:
        await owner.stop(key)
    owner.desk.wake(await owner.db.writing(forget.cancel_pending, key))  # their calls go on
    if stop_running:
        await _stop_and_wait(owner, key)
    await asyncio.sleep(0)  # the woken calls read their cancelled approval before it goes
    helpers = HelpersGone()
    if restricted(mode_of(session.memory_mode)):
        helpers = await _forget_helpers(owner, key, why, stop_running)
    await owner.chores.cancel_for(key)  # nothing more is asked or filed for it; owed ones drop
    done = await asyncio.to_thread(forget.purge_contents, owner.db, session, owner.chats_dir)
    done.failures.extend(helpers.failures)  # a helper left keeps the chat: deleting again ends both
    memory_items = await _forget_memory(owner, done)
    await asyncio.to_thread(forget.remove_row, owner.db, done)
    return _report(done, memory_items, helpers.count, why)


async def _forget_helpers(owner: ChatOwner, key: str, why: str,
                          stop_running: bool) -> HelpersGone:
    """Delete the chat's helpers, each with its own helpers, until none is left. Each round
    first bumps the chat's generation and waits for its turn to end (a helper's report may
    have started one, and only a turn of the chat starts its helpers), so once a round finds
    no new helper, none can be started."""
    gone, tried = HelpersGone(), set[str]()
    for _round in range(HELPER_ROUNDS):
        if stop_running:
            await owner.db.writing(forget.begin, key)  # a report's run queued since is stale
            await _stop_and_wait(owner, key)
        fresh = [k for k in await owner.db.reading(forget.helper_keys, key) if k not in tried]
        if not fresh:
            break
        for helper in fresh:
            tried.add(helper)
            report = await end_chat(owner, helper, why, stop_running=stop_running)
            if report is not None and report.deleted:
                gone.count += 1 + int(report.removed.get("helpers", 0))
    left = await owner.db.reading(forget.helper_keys, key)
    if left:
        gone.failures.append(f"{len(left)} of its helpers' chats could not be removed")
    return gone


async def _stop_and_wait(owner: ChatOwner, key: str) -> None:
    """Stop the chat's running turn and wait (bounded) until no run of it is running. Stop
    is asked again each tick: a turn between its claim and its start cannot be stopped yet."""
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while True:
        await owner.stop(key)
        running = await owner.db.reading(forget.running_run, key)
        if running is None:
            return
        if time.monotonic() >= deadline:
            log.warning("chat %s: its turn %s did not end within %.0f s of being stopped; "
                        "deleting it anyway", key, running, STOP_WAIT_SECONDS)
            return
        await owner.bus.wait_run(running, STOP_TICK_SECONDS)


async def _forget_memory(owner: ChatOwner, done: Purge) -> int:
    """Remove what memory holds filed under this chat alone; a failure keeps the chat."""
    try:
        gone = await asyncio.to_thread(owner.memory.forget_chat, done.key)
    except (SQLAlchemyError, OSError) as error:
        done.failures.append(f"its memory could not be removed ({type(error).__name__})")
        return 0
    return len(gone)


def _report(done: Purge, memory_items: int, helpers: int, why: str) -> DeleteReport:
    removed: dict[str, int | bool] = {**done.removed.as_dict(), "memory_items": memory_items,
                                      "helpers": helpers}
    reason = "; ".join(done.failures) if done.failures else None
    return DeleteReport(done.key, done.row_removed, removed, why, reason)


def _audit(conn: Connection, report: DeleteReport) -> None:
    detail: dict[str, Any] = {"outcome": "deleted" if report.deleted else "failed",
                              "why": report.why, "removed": report.removed}
    if report.reason is not None:
        detail["reason"] = report.reason
    audit.write(conn, "chat.deleted", actor="owner" if report.why == "deleted" else "gateway",
                    session_key=report.key, detail=detail)


async def forget_temporary(owner: ChatOwner, why: str) -> list[DeleteReport]:
    """Forget every chat that ends forgotten, where nothing of this process runs in it (at
    start, before recovery; at close, after the lanes closed)."""
    reports = []
    for key in await owner.db.reading(forget.temporary_keys):
        try:
            report = await _end_quietly(owner, key, why)
        except SQLAlchemyError as error:  # the store failed under it: the next start tries again
            log.warning("temporary chat %s could not be forgotten (%s): %s", key, why,
                        type(error).__name__)
            continue
        if report is not None:
            reports.append(report)
    return reports


async def sweep_idle(owner: ChatOwner, idle_seconds: float,
                     failed: dict[str, float] | None = None,
                     clock: Clock | None = None) -> list[DeleteReport]:
    """Forget the chats that end forgotten and were idle for `idle_seconds` by `clock` (the
    system's by default); one that failed (in `failed`, by when) is tried again only after
    as long."""
    failed = {} if failed is None else failed
    clock = clock or SystemClock()
    now = clock.now()
    reports = []
    for key in await owner.db.reading(forget.idle_temporary_keys, now - idle_seconds):
        if failed.get(key, 0.0) > now - idle_seconds:
            continue
        report = await _end_quietly(owner, key, "idle", idle_before=clock.now() - idle_seconds)
        if report is not None:
            reports.append(report)
            if report.deleted:
                failed.pop(key, None)
            else:
                failed[key] = now
    return reports


async def sweep_forever(owner: ChatOwner, idle_seconds: float, clock: Clock) -> None:
    """The idle sweeper: looks every so often (a quarter of the idle limit, 0.2 to 60 s)."""
    interval = min(60.0, max(0.2, idle_seconds / 4))
    failed: dict[str, float] = {}
    while True:
        await clock.sleep(interval)
        try:
            await sweep_idle(owner, idle_seconds, failed, clock)
        except SQLAlchemyError as error:  # the store is busy or away: look again next time
            log.warning("the idle sweep of temporary chats failed (%s); trying again later",
                        type(error).__name__)


async def _end_quietly(owner: ChatOwner, key: str, why: str,
                       idle_before: float | None = None) -> DeleteReport | None:
    report = await end_chat(owner, key, why, stop_running=why == "idle",
                            idle_before=idle_before)
    if report is not None and not report.deleted:
        log.warning("temporary chat %s could not be forgotten (%s): %s", key, why, report.reason)
    return report
