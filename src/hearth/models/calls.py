"""The per-call record's writer: what one model call was, written when its stream ends.

Owns `CallRecorder` (installed on the call guard by the engine's composition: the store and
the live model entries it prices by) and `Call`, one call followed from its first event to its
end: its outcome (ok, failed, timeout, cut_off, output_cap, refused), tokens and duration, and
whether its usage is the guard's estimate (`estimated`: its provider reported none). The
chat's key is kept only for a persistent chat, read from the work scope's mode (the one
reader, failing closed): Incognito, Temporary and an unreadable mode get none. Nothing of the
request or the answer is kept, and the log lines name the model and the error's type only.

A row is bookkeeping: written with `durable=False` by a task of its own, so the stream's end
never waits on the store, and a write that fails is logged and forgotten. Inside a turn
(`held_calls`, opened by the turn's runner) the row of the turn's latest call is held instead
and written in the turn's ending's transaction (`engine.turn.endings.settle`): a plain answer's
one call costs no write of its own. A call ending while another's row is held has the earlier
row written as before, so a turn holds one row at most, and one of a call that ends after the
turn took its rows (a task the turn left behind) is written as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from hearth.config import ModelConfig
from hearth.models.pricing import price
from hearth.models.spending import Account, Hold, account
from hearth.models.types import AnswerCutOff, Completed, Provider, Usage
from hearth.privacy import scope as work_scope
from hearth.privacy.modes import keeps_memory
from hearth.privacy.reach import OtherModelRefused
from hearth.store.db import Database, now
from hearth.store.errors import StoreError
from hearth.store.model_calls import CallRow, insert_call

log = logging.getLogger(__name__)

WRITE_WAIT = 30.0  # seconds a row's write may wait on the writer before it is given up
REFUSALS = ("refusal", "content_filter")  # finish reasons of an answer the model refused
STOPPED = (asyncio.CancelledError, GeneratorExit)  # the caller stopped reading


def chat_key() -> str | None:
    """The key of the chat the work running now is for, only when that chat is persistent."""
    scope = work_scope.current()
    if scope is None or not keeps_memory(scope.mode):
        return None
    return scope.session_key


def outcome_of(done: Completed | None, error: BaseException | None) -> str:
    """The outcome word of a call that ended with `done` (its terminal event, if it came)
    and `error` (what ended its stream, if anything did)."""
    if done is not None:
        if done.finish_reason == "length":
            return "output_cap"
        return "refused" if done.finish_reason in REFUSALS else "ok"
    if isinstance(error, OtherModelRefused):
        return "refused"
    if isinstance(error, (AnswerCutOff, *STOPPED)) or error is None:
        return "cut_off"  # no terminal event: the answer did not reach its end
    return "timeout" if _timed_out(error) else "failed"


def _timed_out(error: BaseException) -> bool:
    """Did `error`, or what it was raised from, say a time limit ran out (Python's
    TimeoutError, or an SDK's or transport's timeout class, named so)?"""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError) or "Timeout" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass
class Call:
    """One model call, followed from its first event to its end."""

    model_id: str
    provider: str
    purpose: str
    session_key: str | None = field(default_factory=chat_key)
    began: float = field(default_factory=time.monotonic)
    done: Completed | None = None
    account: Account = field(default_factory=account)  # whom it is spent for
    hold: Hold | None = None  # what the spending limits reserved for it
    streamed: int = 0  # characters of text its stream yielded
    estimate: Usage | None = None  # what it used, estimated: its provider reported nothing

    @property
    def usage(self) -> Usage:
        """What the call used: the estimate when there is one, else what was reported."""
        if self.estimate is not None:
            return self.estimate
        return self.done.usage if self.done is not None else Usage()

    @classmethod
    def of(cls, provider: Provider, purpose: str) -> Call:
        return cls(provider.model_id, getattr(provider, "provider", "unknown"), purpose)

    def row(self, error: BaseException | None, model: ModelConfig | None) -> CallRow:
        """The row of the call, ended by `error` (None: its stream ended normally), priced at
        `model`'s prices."""
        usage = self.usage
        return CallRow(
            created_at=now(), model_id=self.model_id, provider=self.provider,
            purpose=self.purpose, outcome=outcome_of(self.done, error),
            tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, cost_usd=price(model, usage),
            duration_ms=round((time.monotonic() - self.began) * 1000),
            session_key=self.session_key, agent=self.account.agent, app=self.account.app,
            job=self.account.job, estimated=self.estimate is not None)


    def charged(self, usd: float) -> CallRow:
        """The row of a paid call that is no model's (a web search): no tokens, `usd`."""
        return CallRow(created_at=now(), model_id=self.model_id, provider=self.provider,
                       purpose=self.purpose, outcome="ok", tokens_in=0, tokens_out=0,
                       cost_usd=usd, duration_ms=0, session_key=self.session_key,
                       agent=self.account.agent, app=self.account.app, job=self.account.job)


class Held:
    """The row of a turn's latest call, held for its ending's transaction (see the module
    docstring)."""

    def __init__(self) -> None:
        self._row: CallRow | None = None
        self._open = True

    def keep(self, row: CallRow) -> CallRow | None:
        """Hold `row`; what is to be written now: the row held before it (None: none was),
        or `row` itself when the turn took its rows already."""
        if not self._open:
            return row
        before, self._row = self._row, row
        return before

    def take(self) -> list[CallRow]:
        """The row held (for the ending's transaction); nothing is held after this."""
        self._open = False
        row, self._row = self._row, None
        return [row] if row is not None else []


_held: ContextVar[Held | None] = ContextVar("hearth_held_calls", default=None)


@contextmanager
def held_calls() -> Iterator[Held]:
    """Hold the rows of the calls made inside (a turn's), for the turn's ending to write."""
    held = Held()
    token = _held.set(held)
    try:
        yield held
    finally:
        _held.reset(token)


def write_in(conn: Connection, rows: Sequence[CallRow]) -> None:
    """Write held rows inside the caller's transaction (a turn's ending), in a savepoint of
    their own: rows that cannot be written are logged and forgotten, and the caller's write
    goes on without them."""
    if not rows:
        return
    try:
        with conn.begin_nested():
            for row in rows:
                insert_call(conn, row)
    except (SQLAlchemyError, ValueError) as error:
        log.warning("a call of model %s was not recorded (%s)", rows[0].model_id,
                    type(error).__name__)


class CallRecorder:
    """Writes each ended call's row to `db`, priced by `entry_of(model_id)` (the live model
    entries: a price set on the Settings page counts from the next call)."""

    def __init__(self, db: Database,
                 entry_of: Callable[[str], ModelConfig | None],
                 observe: Callable[[Call, CallRow], None] | None = None) -> None:
        self._db = db
        self._entry_of = entry_of
        self._observe = observe  # told each ended call and its row (the engine's metrics)
        self._pending: set[asyncio.Task[None]] = set()

    def ended(self, call: Call, error: BaseException | None) -> None:
        """Record `call`, ended by `error`, without waiting: a task writes its row, or inside
        a turn the turn's ending does (see `held_calls`)."""
        row = call.row(error, self._entry_of(call.model_id))
        if self._observe is not None:
            self._observe(call, row)
        held = _held.get()
        now = held.keep(row) if held is not None else row
        if now is not None:
            self._write_soon(now)

    def record(self, row: CallRow) -> None:
        """Write `row` soon, as it is (a paid call that is no model's)."""
        self._write_soon(row)

    def _write_soon(self, row: CallRow) -> None:
        """A task writes `row`; outside an event loop it is logged as not recorded."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            log.warning("a call of model %s was not recorded (no event loop)", row.model_id)
            return
        task = loop.create_task(self._write(row), name=f"record-call:{row.model_id}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def settled(self) -> None:
        """Wait until every row asked for so far is written (or given up)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _write(self, row: CallRow) -> None:
        try:
            async with asyncio.timeout(WRITE_WAIT):
                await self._db.writing(insert_call, row, durable=False)
        except (SQLAlchemyError, StoreError, TimeoutError) as error:
            log.warning("a call of model %s was not recorded (%s)", row.model_id,
                        type(error).__name__)
