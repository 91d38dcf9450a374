"""Background chores after a turn, and the chores owed: titles, learning, idle summaries.

After a turn completes, a kept chat gets its chores, each a task of its own that never holds
up the chat: its title (once, after its first exchange: only while the chat is untitled,
and not while a title is being asked or owed) and learning. Learning does not run after
every turn: a pass runs when the chat has been left alone `[learning] idle_seconds` (a timer
per chat, moved on by each turn; at start, one for each chat with exchanges a previous process
had not learned), or after every `[learning] every_turns` completed turns, whichever comes
first, one pass of a chat at a time (a pass asked for while one runs follows it). A pass
reads every exchange past the chat's cursor (`store.learned`), the owner's own words only
(`owners_own`), in batches of `LEARN_BATCH`, and moves the cursor past what it read once what
they taught is kept: each exchange is learned from once, and none is skipped. Each is a call of its
own on the background chain (the chat chain when that is empty), through the chore runner
(`models.chore_runner`), its providers built in a worker thread. A restricted chat gets
none: its mode is read again here (the one reader, failing closed) and no task is made, so
nothing of it reaches a background model. Other kinds register their doer (`register`: the
idle summaries, `engine.background.idle_summaries`) and owe through `owe`.

A chore no model could do is owed (`store.owed_chores`, so the list survives a restart), once
per chat and kind (a chat owed learning starts no pass of its own until the owed one is done:
it reads every exchange past the cursor), and tried again by one loop that runs from `start`
to `close`. It follows the breakers: nothing is tried while every model of the chain is
resting (its breaker open), and a chore that failed because every model was resting is tried
again, uncounted, as soon as one may be called (closed, or its pause over so a probe may go).
A chore a model could be asked for and failed waits a pause that doubles with each try
(`Pace`), and is given up after `Pace.most_attempts` counted tries (`Pace.most_unusable` when
every model answered it unusably: asking again gives the same) or `Pace.keep_for` seconds,
saying so in the log. Every call is taken from the background budget
(`engine.background.budget`, this object's `budget`): one the hour's budget refused is owed
uncounted until it has room; one its turn's budget refused is not owed (that turn has had its
calls). An owed chore keeps the sentence saying why (the desk shows it). The loop sleeps until
the next chore falls due or a breaker's pause ends (a newly owed chore wakes it), never longer
than `Pace.tick`, and tries the due ones one at a time, so a chain that fails again stops the
pass. A try re-reads the chat first: one deleted, restricted, or (for a title) titled since
owes nothing more. Deleting a chat cancels its chores and drops those it is owed
(`cancel_for`). A chore still running when the gateway stops is cancelled; it wrote nothing it
had not finished, and one owed stays owed.
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

from hearth.config import LearningConfig, LimitsConfig
from hearth.engine.access.principals import owners_own
from hearth.engine.background import budget, titles
from hearth.engine.background.budget import BackgroundBudget
from hearth.memory import learning
from hearth.memory.service import Memory
from hearth.models.chore_runner import Owed, background_chain
from hearth.models.registry import ModelRegistry
from hearth.models.types import Provider
from hearth.privacy.modes import keeps_memory, mode_of, restricted
from hearth.store import (
    learned as learned_store,
    model_calls,
    owed_chores as owed_store,
    runs as run_store,
    sessions as session_store,
    transcript,
)
from hearth.store.db import Database
from hearth.store.owed_chores import OwedRow
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.tasks import cancel_and_wait

log = logging.getLogger(__name__)

NAP_FLOOR = 0.05  # seconds: the loop never looks again sooner than this
LEARN_BATCH = 40  # exchanges one learning call reads, at most


class Outcome(Enum):
    DONE = "done"  # a model did it
    OWED = "owed"  # no model could: try again later
    MOOT = "moot"  # nothing to do (the chat is gone, restricted, titled; no chain)


Tried = Outcome | Owed  # what came of a try: an Owed is OWED, saying why
Doer = Callable[[str, str | None], Awaitable[Tried]]  # (chat, run) → what came of it


@dataclass
class Pace:
    """How owed chores are tried again."""

    first_pause: float = 60.0  # seconds before the first retry; doubled after each try
    longest_pause: float = 3600.0
    most_attempts: int = 20  # counted tries in all, the first included; then it is given up
    most_unusable: int = 2  # of a chore whose every answer was unusable: asking again gives
    # the same answer, so it is given up sooner
    keep_for: float = 7 * 24 * 3600.0  # owed longer than this, it is given up
    tick: float = 60.0  # the longest the loop sleeps before it looks again
    batch: int = 8  # chores tried in one pass, at most

    def pause(self, attempts: int) -> float:
        """The pause after the `attempts`-th try."""
        return min(self.longest_pause, self.first_pause * 2 ** max(0, attempts - 1))

    def gives_up(self, row: OwedRow, at: float, unusable: bool = False) -> bool:
        """Is a chore owed since `row.created_at` and tried `row.attempts` times given up
        (`unusable`: its last try's answers all were)?"""
        most = min(self.most_unusable, self.most_attempts) if unusable else self.most_attempts
        return row.attempts >= most or at - row.created_at > self.keep_for


@dataclass(frozen=True)
class Exchange:
    """A chat as it reads now, and one turn's message and final answer."""

    chat: SessionRow | None
    question: str = ""
    answer: str = ""
    guest: bool = False  # the run is not the owner's own (an app's, a guest's, a report)


@dataclass(frozen=True)
class Unlearned:
    """A chat as it reads now, its cursor, and the exchanges past it (a batch at most)."""

    chat: SessionRow | None
    cursor: int = 0
    runs: tuple[RunRow, ...] = ()
    exchanges: tuple[Exchange, ...] = ()

    @property
    def upto(self) -> int:
        """The seq the cursor moves to once these are learned from."""
        return max((run.user_event_seq or 0 for run in self.runs), default=self.cursor)

    def owners(self) -> list[learning.Exchange]:
        """What learning may read of them: the owner's own exchanges that were answered."""
        return [learning.Exchange(e.question, e.answer) for e in self.exchanges
                if not e.guest and e.answer]


class Chores:
    def __init__(self, db: Database, models: Callable[[], ModelRegistry],
                 memory: Memory, pace: Pace | None = None,
                 learning_settings: Callable[[], LearningConfig] = LearningConfig,
                 limits: Callable[[], LimitsConfig] = LimitsConfig) -> None:
        self._db = db
        self.budget = BackgroundBudget(limits)  # every chore's calls are taken from it
        self._registry = models  # the engine's current one: a chore reads it when it starts
        self._memory = memory
        self.pace = pace or Pace()
        self._settings = learning_settings  # the engine's current [learning]
        self._turns: dict[str, int] = {}  # each chat's completed turns since its last pass
        self._timers: dict[str, asyncio.TimerHandle] = {}  # each chat's idle timer
        self._again: set[str] = set()  # chats whose pass was asked for while one ran
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
        self._turned(session.key)

    # ------------------------------------------------------------------ when learning runs

    def _turned(self, key: str) -> None:
        """A turn of chat `key` completed: learn now if it is the `every_turns`-th since the
        last pass, else (again) in `idle_seconds` unless another turn comes first."""
        settings = self._settings()
        count = self._turns.get(key, 0) + 1
        if count >= settings.every_turns:
            self._learn_now(key)
            return
        self._turns[key] = count
        self._arm(key, settings.idle_seconds)

    def _arm(self, key: str, delay: float) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._idled, key)

    def _idled(self, key: str) -> None:
        self._timers.pop(key, None)
        self._learn_now(key)

    def _learn_now(self, key: str) -> None:
        """Start a pass of chat `key` (after the one running, if one is)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._turns.pop(key, None)
        if self._busy(learning.KIND, key):
            self._again.add(key)
            return
        self._start(learning.KIND, key, self._pass(key))

    async def _pass(self, key: str) -> None:
        """A pass of its own (not a retry): none while the chat is owed one already."""
        if not await self._db.reading(owed_store.is_owed, key, learning.KIND):
            tried = await self._learn(key, None)
            if isinstance(tried, Owed):
                await self.owe(learning.KIND, key, None, tried)
        if key in self._again:  # asked for while this one ran: it may have read too early
            self._again.discard(key)
            self._start(learning.KIND, key, self._pass(key))

    # ------------------------------------------------------------------ a chore's first try

    async def _first(self, kind: str, key: str, run: RunRow) -> None:
        if kind == titles.KIND and await self._db.reading(owed_store.is_owed, key, kind):
            return  # a title owed already is tried by the retry loop, from its own exchange
        tried = await self._doers[kind](key, run.run_id)
        if isinstance(tried, Owed):
            await self.owe(kind, key, run.run_id, tried)

    async def owe(self, kind: str, key: str, run_id: str | None,
                  owed: Owed | None = None) -> None:
        """Keep a chore no model could do (`owed` says why), to be tried again: as soon as a
        model may be called when every one was resting or the hourly budget was spent
        (uncounted), else after the first pause. One its turn's budget refused is not kept:
        that turn has had its calls (the chat's next turn asks again)."""
        if owed is not None and owed.turn_spent:
            log.info("the %s chore of chat %s is not owed: %s", kind, key, owed.sentence())
            return
        uncounted = self._uncounted_wait(owed)
        at = time.time()
        await self._db.writing(
            owed_store.owe, kind, key, run_id, attempts=0 if uncounted is not None else 1,
            next_at=at + (uncounted if uncounted is not None else self.pace.pause(1)),
            reason=owed.sentence() if owed is not None else None)
        self._wake.set()

    def _uncounted_wait(self, owed: Owed | None) -> float | None:
        """When a try that `owed` ended is not counted (no model was asked: every one was
        resting, or the hourly budget was spent), the pause before the next (the loop waits
        for `_ready_in` too); else None."""
        if self._ready_in() > 0 or (owed is not None and owed.over_budget):
            return 0.0  # the loop looks again once a breaker's pause ends, the budget has room
        return None

    # ------------------------------------------------------------------ the chores

    async def _title(self, key: str, run_id: str | None) -> Tried:
        said = await self._db.reading(_exchange, key, run_id)
        chain = await self._chain()
        if (said.chat is None or restricted(mode_of(said.chat.memory_mode))
                or said.chat.title is not None or not said.answer or not chain):
            return Outcome.MOOT
        outcome = await titles.title_chat(
            self._db, chain, session_key=key, recorded_mode=said.chat.memory_mode,
            question=said.question, answer=said.answer, breakers=self._registry().breakers,
            allowance=self.budget.for_turn(run_id))
        return outcome if isinstance(outcome, Owed) else Outcome.DONE

    async def _learn(self, key: str, run_id: str | None) -> Tried:
        """Learn from every exchange of the chat past its cursor, a batch at a time, moving
        the cursor past each batch once what it taught is kept."""
        del run_id  # a pass (an owed one too) reads every exchange past the cursor
        outcome = Outcome.MOOT
        while True:
            batch = await self._db.reading(_unlearned, key, LEARN_BATCH)
            if (batch.chat is None or not keeps_memory(mode_of(batch.chat.memory_mode))
                    or not batch.runs):
                return outcome  # memory learns from a chat that keeps it only
            chain = await self._chain()
            if not chain:
                return Outcome.MOOT  # the cursor stays: learned once a model is set up
            said = batch.owners()  # memory learns from the owner's own words only
            if said:
                learned = await learning.learn_from(
                    self._memory, chain, db=self._db, session_key=key,
                    recorded_mode=batch.chat.memory_mode, run_id=batch.runs[-1].run_id,
                    exchanges=said, breakers=self._registry().breakers,
                    allowance=self.budget.for_turn(batch.runs[-1].run_id))
                log.info("learning for a chat: %d exchanges, %d written, %d known%s",
                         len(said), learned.written, learned.known,
                         " (no model could; it is owed)" if learned.failed else "")
                if learned.owed is not None:
                    return learned.owed
            if not await self._db.writing(learned_store.advance, key, batch.cursor, batch.upto):
                return outcome  # another pass moved it meanwhile: it read these
            outcome = Outcome.DONE
            if len(batch.runs) < LEARN_BATCH:
                return outcome

    async def _chain(self) -> list[Provider]:
        """The background chain's models, in order (the chat chain's when it is empty; none
        when no model is set up), built in a worker thread: a first build imports an SDK."""
        return await asyncio.to_thread(background_chain, self._registry())

    def _ready_in(self) -> float:
        """Seconds until a model of the chain may be called (0: now, or no chain at all):
        until one's breaker lets a call go, and the hourly budget has room for it."""
        registry = self._registry()
        chain = registry.chain("background")
        resting = min((registry.breakers.ready_in(m) for m in chain), default=0.0)
        return max(resting, self.budget.ready_in())

    # ------------------------------------------------------------------ owed chores

    async def start(self) -> None:
        """Start trying the owed chores again (those a previous process left included), and
        learning from the exchanges a previous process had not learned from, once each chat
        is idle."""
        if self._loop is None:
            hour_ago = time.time() - budget.HOUR  # a restart does not reset the hour's count
            self.budget.seed(await self._db.reading(
                model_calls.made_since, hour_ago, tuple(self._doers)))  # each kind's purpose
            self._wake = asyncio.Event()  # of this loop
            self._loop = asyncio.create_task(self._retry_forever(), name="chores:owed")
            idle, now = self._settings().idle_seconds, time.time()
            for key, mode, touched in await self._db.reading(learned_store.waiting):
                if keeps_memory(mode_of(mode)):
                    self._arm(key, max(NAP_FLOOR, touched + idle - now))

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
        tried = await self._doers[row.kind](row.session_key, row.run_id)
        if not isinstance(tried, Owed) or tried.turn_spent:
            await self._db.writing(owed_store.settle, row.id)
            return
        uncounted = self._uncounted_wait(tried)  # no model was asked: not counted
        counted = replace(claimed, attempts=claimed.attempts - (uncounted is not None))
        if self.pace.gives_up(counted, time.time(), unusable=tried.unusable):
            log.warning("the %s chore of chat %s is given up after %d tries: %s", row.kind,
                        row.session_key, counted.attempts, tried.sentence())
            await self._db.writing(owed_store.settle, row.id)
            return
        wait = uncounted if uncounted is not None else self.pace.pause(counted.attempts)
        await self._db.writing(owed_store.put_back, row.id, attempts=counted.attempts,
                               next_at=time.time() + wait, reason=tried.sentence())

    # ------------------------------------------------------------------ tasks

    def _start(self, kind: str, key: str,
               work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=f"chore:{kind}:{key}")
        self._running[task] = (kind, key)
        task.add_done_callback(self._done)
        return task

    def _busy(self, kind: str, key: str) -> bool:
        return (kind, key) in self._running.values()

    def running(self, kind: str, key: str) -> bool:
        """Whether a chore of this kind runs for chat `key` now (the delivery desk asks)."""
        return self._busy(kind, key)

    def wake(self) -> None:
        """Look at the owed chores now (one was made due by hand)."""
        self._wake.set()

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
        self._forget(session_key)
        await _cancel([t for t, (_, key) in self._running.items() if key == session_key])
        await self._db.writing(owed_store.drop_chat, session_key)
        # a chore that was ending as the first cancel came may have owed itself since
        await _cancel([t for t, (_, key) in self._running.items() if key == session_key])
        await self._db.writing(owed_store.drop_chat, session_key)

    def _forget(self, key: str) -> None:
        """No more learning for chat `key`: its timer, count and pass asked for go."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._turns.pop(key, None)
        self._again.discard(key)

    async def close(self) -> None:
        for key in list(self._timers):
            self._forget(key)
        await cancel_and_wait(self._loop)
        self._loop = None
        await _cancel(list(self._running))


def _exchange(conn: Connection, key: str, run_id: str | None) -> Exchange:
    """The chat as it reads now, and the run's message and its final answer."""
    chat = session_store.get(conn, key)
    run = run_store.get(conn, run_id) if run_id is not None else None
    if chat is None or run is None or run.session_key != key or run.user_event_seq is None:
        return Exchange(chat)
    return _said_in(conn, chat, run)


def _said_in(conn: Connection, chat: SessionRow, run: RunRow) -> Exchange:
    """The run's message and its final answer, and whether they are the owner's own."""
    assert run.user_event_seq is not None
    events = transcript.of_run(conn, chat.key, run.run_id, run.user_event_seq)
    asked = next((e for e in events if e.kind == "user"), None)
    question = str(asked.content.get("text", "")) if asked is not None else ""
    answers = [str(e.content.get("text", "")) for e in events
               if e.kind == "assistant" and not e.meta.get("partial")]
    meta = (asked.meta or {}) if asked is not None else {}
    guest = not owners_own(run.principal, meta)  # not the owner's own words
    return Exchange(chat, question, answers[-1] if answers else "", guest)


def _unlearned(conn: Connection, key: str, limit: int) -> Unlearned:
    """The chat, its cursor and its exchanges past it, oldest first (`limit` at most)."""
    chat = session_store.get(conn, key)
    at = learned_store.cursor(conn, key)
    if chat is None or at is None:
        return Unlearned(None)
    runs = learned_store.runs_since(conn, key, chat.tab_id, at, limit)
    return Unlearned(chat, at, tuple(runs),
                     tuple(_said_in(conn, chat, run) for run in runs))


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
