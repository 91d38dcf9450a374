"""Background chores after a turn, and the chores owed: titles, learning, idle summaries.

After a turn completes, a kept chat gets its chores, each a task of its own that never holds
up the chat: its title (once, after its first exchange: only while the chat is untitled,
and not while a title is being asked or owed) and after-turn learning. Each is a call of its
own on the background chain (the chat chain when that is empty), through the chore runner
(`models.chore_runner`), its providers built in a worker thread. A restricted chat gets
none: its mode is read again here (the one reader, failing closed) and no task is made, so
nothing of it reaches a background model. Other kinds register their doer (`register`: the
idle summaries, `engine.background.idle_summaries`) and owe through `owe`.

A chore no model could do is owed (`store.owed_chores`, so the list survives a restart) and
tried again by one loop that runs from `start` to `close`. It follows the breakers: nothing
is tried while every model of the chain is resting (its breaker open), and a chore that failed
because every model was resting is tried again, uncounted, as soon as one may be called
(closed, or its pause over so a probe may go). A chore a model could be asked for and failed
waits a pause that doubles with each try (`Pace`), and is given up after `Pace.most_attempts`
counted tries or `Pace.keep_for` seconds, saying so in the log. The loop sleeps until the next
chore falls due or a breaker's pause ends (a newly owed chore wakes it), never longer than
`Pace.tick`, and tries the due ones one at a time, so a chain that fails again stops the pass.
A try re-reads the chat first: one deleted, restricted, or (for a title) titled since owes
nothing more. Deleting a chat cancels its chores and drops those it is owed (`cancel_for`). A
chore still running when the gateway stops is cancelled; it wrote nothing it had not
finished, and one owed stays owed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from hearth.engine.access.principals import owners_own
from hearth.engine.background import titles
from hearth.memory import learning
from hearth.memory.service import Memory
from hearth.models.chore_runner import Owed, background_chain
from hearth.models.registry import ModelRegistry
from hearth.models.types import Provider
from hearth.privacy.modes import keeps_memory, mode_of, restricted
from hearth.store import (
    owed_chores as owed_store,
    runs as run_store,
    sessions as session_store,
    transcript,
)
from hearth.store.db import Database
from hearth.store.owed_chores import OwedRow
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow

log = logging.getLogger(__name__)

NAP_FLOOR = 0.05  # seconds: the loop never looks again sooner than this


class Outcome(Enum):
    DONE = "done"  # a model did it
    OWED = "owed"  # no model could: try again later
    MOOT = "moot"  # nothing to do (the chat is gone, restricted, titled; no chain)


Doer = Callable[[str, str | None], Awaitable[Outcome]]  # (chat, run) → what came of it


@dataclass
class Pace:
    """How owed chores are tried again."""

    first_pause: float = 60.0  # seconds before the first retry; doubled after each try
    longest_pause: float = 3600.0
    most_attempts: int = 20  # counted tries in all, the first included; then it is given up
    keep_for: float = 7 * 24 * 3600.0  # owed longer than this, it is given up
    tick: float = 60.0  # the longest the loop sleeps before it looks again
    batch: int = 8  # chores tried in one pass, at most

    def pause(self, attempts: int) -> float:
        """The pause after the `attempts`-th try."""
        return min(self.longest_pause, self.first_pause * 2 ** max(0, attempts - 1))

    def gives_up(self, row: OwedRow, at: float) -> bool:
        """Is a chore owed since `row.created_at` and tried `row.attempts` times given up?"""
        return row.attempts >= self.most_attempts or at - row.created_at > self.keep_for


@dataclass(frozen=True)
class Exchange:
    """A chat as it reads now, and one turn's message and final answer."""

    chat: SessionRow | None
    question: str = ""
    answer: str = ""
    guest: bool = False  # the run is not the owner's own (an app's, a guest's, a report)


class Chores:
    def __init__(self, db: Database, models: Callable[[], ModelRegistry],
                 memory: Memory, pace: Pace | None = None) -> None:
        self._db = db
        self._registry = models  # the engine's current one: a chore reads it when it starts
        self._memory = memory
        self.pace = pace or Pace()
        self._doers: dict[str, Doer] = {titles.KIND: self._title, learning.KIND: self._learn}
        self._running: dict[asyncio.Task[None], tuple[str, str]] = {}  # each: (kind, chat)
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # set when a chore is owed: the loop looks again

    def register(self, kind: str, doer: Doer) -> None:
        """Add a kind of chore that may be owed (its doer is what a retry runs)."""
        self._doers[kind] = doer

    def after_turn(self, run: RunRow, session: SessionRow) -> None:
        """Start the after-turn chores for a turn that completed."""
        if restricted(mode_of(session.memory_mode)) or run.user_event_seq is None:
            return  # restricted chats hand nothing to a background model
        if session.title is None and not self._busy(titles.KIND, session.key):
            self._start(titles.KIND, session.key, self._first(titles.KIND, session.key, run))
        self._start(learning.KIND, session.key, self._first(learning.KIND, session.key, run))

    # ------------------------------------------------------------------ a chore's first try

    async def _first(self, kind: str, key: str, run: RunRow) -> None:
        if kind == titles.KIND and await self._db.reading(owed_store.is_owed, key, kind):
            return  # a title owed already is tried by the retry loop, from its own exchange
        if await self._doers[kind](key, run.run_id) is Outcome.OWED:
            await self.owe(kind, key, run.run_id)

    async def owe(self, kind: str, key: str, run_id: str | None) -> None:
        """Keep a chore no model could do, to be tried again: as soon as a model may be
        called when every one was resting (uncounted), else after the first pause."""
        resting = self._ready_in() > 0
        at = time.time()
        await self._db.writing(owed_store.owe, kind, key, run_id, attempts=0 if resting else 1,
                               next_at=at if resting else at + self.pace.pause(1))
        self._wake.set()

    # ------------------------------------------------------------------ the chores

    async def _title(self, key: str, run_id: str | None) -> Outcome:
        said = await self._db.reading(_exchange, key, run_id)
        chain = await self._chain()
        if (said.chat is None or restricted(mode_of(said.chat.memory_mode))
                or said.chat.title is not None or not said.answer or not chain):
            return Outcome.MOOT
        outcome = await titles.title_chat(
            self._db, chain, session_key=key, recorded_mode=said.chat.memory_mode,
            question=said.question, answer=said.answer, breakers=self._registry().breakers)
        return Outcome.OWED if isinstance(outcome, Owed) else Outcome.DONE

    async def _learn(self, key: str, run_id: str | None) -> Outcome:
        said = await self._db.reading(_exchange, key, run_id)
        chain = await self._chain()
        if (said.chat is None or not keeps_memory(mode_of(said.chat.memory_mode))
                or not said.answer or not chain or said.guest):
            return Outcome.MOOT  # memory learns from the owner's own words only
        learned = await learning.learn_after_turn(
            self._memory, chain, db=self._db, session_key=key,
            recorded_mode=said.chat.memory_mode, run_id=run_id, question=said.question,
            answer=said.answer, breakers=self._registry().breakers)
        log.info("after-turn learning for %s: %d written, %d known%s", run_id, learned.written,
                 learned.known, " (no model could; it is owed)" if learned.failed else "")
        return Outcome.OWED if learned.failed else Outcome.DONE

    async def _chain(self) -> list[Provider]:
        """The background chain's models, in order (the chat chain's when it is empty; none
        when no model is set up), built in a worker thread: a first build imports an SDK."""
        return await asyncio.to_thread(background_chain, self._registry())

    def _ready_in(self) -> float:
        """Seconds until a model of the chain may be called (0: now, or no chain at all)."""
        registry = self._registry()
        chain = registry.chain("background")
        return min((registry.breakers.ready_in(m) for m in chain), default=0.0)

    # ------------------------------------------------------------------ owed chores

    async def start(self) -> None:
        """Start trying the owed chores again (those a previous process left included)."""
        if self._loop is None:
            self._wake = asyncio.Event()  # of this loop
            self._loop = asyncio.create_task(self._retry_forever(), name="chores:owed")

    async def _retry_forever(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.retry_due()
                nap = await self._nap()
            except SQLAlchemyError as error:  # the store is busy or away: look again later
                log.warning("owed chores could not be read (%s); trying again later",
                            type(error).__name__)
                nap = self.pace.tick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), nap)

    async def _nap(self) -> float:
        """How long the loop may sleep: until the next chore falls due, or (when one is due
        already) until a model of the chain may be called; at most `Pace.tick`."""
        soonest = await self._db.reading(owed_store.soonest, tuple(self._doers))
        if soonest is None:
            return self.pace.tick
        wait = max(soonest - time.time(), self._ready_in())
        return min(self.pace.tick, max(wait, NAP_FLOOR))

    async def retry_due(self) -> int:
        """Try the owed chores that are due (a batch at most), one at a time, while a model
        of the chain may be called; how many were tried."""
        due = await self._db.reading(owed_store.due, time.time(), self.pace.batch,
                                     tuple(self._doers))
        tried = 0
        for row in due:
            if self._ready_in() > 0:
                break  # every model is resting: the breakers say when to look again
            await asyncio.wait({self._start(row.kind, row.session_key, self._retry(row))})
            tried += 1
        return tried

    async def _retry(self, row: OwedRow) -> None:
        claimed = await self._db.writing(owed_store.claim, row.id,
                                         time.time() + self.pace.pause(row.attempts + 1))
        if claimed is None:
            return  # done meanwhile, or its chat deleted
        outcome = await self._doers[row.kind](row.session_key, row.run_id)
        if outcome is not Outcome.OWED:
            await self._db.writing(owed_store.settle, row.id)
            return
        resting = self._ready_in() > 0  # every model resting: this try is not counted
        counted = replace(claimed, attempts=claimed.attempts - resting)
        if self.pace.gives_up(counted, time.time()):
            log.warning("the %s chore of chat %s is given up after %d tries", row.kind,
                        row.session_key, counted.attempts)
            await self._db.writing(owed_store.settle, row.id)
        elif resting:  # tried again as soon as a model may be called
            await self._db.writing(owed_store.put_back, row.id, attempts=counted.attempts,
                                   next_at=time.time())

    # ------------------------------------------------------------------ tasks

    def _start(self, kind: str, key: str,
               work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=f"chore:{kind}:{key}")
        self._running[task] = (kind, key)
        task.add_done_callback(self._done)
        return task

    def _busy(self, kind: str, key: str) -> bool:
        return (kind, key) in self._running.values()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a background chore failed: %r", task.exception())

    async def settled(self) -> None:
        """Wait until no chore is running (those started meanwhile included)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def cancel_for(self, session_key: str) -> None:
        """Cancel the chat's chores and drop those it is owed (it is being deleted: nothing
        more may be asked or filed for it), and wait for them to stop."""
        await _cancel([t for t, (_, key) in self._running.items() if key == session_key])
        await self._db.writing(owed_store.drop_chat, session_key)
        # a chore that was ending as the first cancel came may have owed itself since
        await _cancel([t for t, (_, key) in self._running.items() if key == session_key])
        await self._db.writing(owed_store.drop_chat, session_key)

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        await _cancel(list(self._running))


def _exchange(conn: Connection, key: str, run_id: str | None) -> Exchange:
    """The chat as it reads now, and the run's message and its final answer."""
    chat = session_store.get(conn, key)
    run = run_store.get(conn, run_id) if run_id is not None else None
    if chat is None or run is None or run.session_key != key or run.user_event_seq is None:
        return Exchange(chat)
    events = transcript.of_run(conn, key, run.run_id, run.user_event_seq)
    asked = next((e for e in events if e.kind == "user"), None)
    question = str(asked.content.get("text", "")) if asked is not None else ""
    answers = [str(e.content.get("text", "")) for e in events
               if e.kind == "assistant" and not e.meta.get("partial")]
    meta = (asked.meta or {}) if asked is not None else {}
    guest = not owners_own(run.principal, meta)  # not the owner's own words
    return Exchange(chat, question, answers[-1] if answers else "", guest)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
