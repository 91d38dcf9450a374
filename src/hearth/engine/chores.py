"""Background chores after a turn: today, after-turn learning on the background chain.

A chore runs as a task of its own, after the turn has settled, and never holds up the chat.
A restricted chat gets none: its mode is read again here (the one reader, failing closed)
and no task is made, so nothing of it reaches a background model. A chore still running when
the gateway stops is cancelled; it wrote nothing it had not finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from hearth.memory import learning
from hearth.memory.service import Memory
from hearth.models.registry import ModelRegistry
from hearth.privacy.modes import keeps_memory, mode_of
from hearth.store import transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow

log = logging.getLogger(__name__)


class Chores:
    def __init__(self, db: Database, models: Callable[[], ModelRegistry],
                 memory: Memory) -> None:
        self._db = db
        self._registry = models  # the engine's current one: a chore reads it when it starts
        self._memory = memory
        self._running: dict[asyncio.Task[None], str] = {}  # each chore, and its chat

    def after_turn(self, run: RunRow, session: SessionRow) -> None:
        """Start the after-turn chores for a turn that completed."""
        if not keeps_memory(mode_of(session.memory_mode)) or run.user_event_seq is None:
            return  # restricted chats never learn, and hand nothing to a background model
        task = asyncio.create_task(self._learn(run, session), name=f"learn:{run.run_id}")
        self._running[task] = session.key
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    async def _learn(self, run: RunRow, session: SessionRow) -> None:
        registry = self._registry()
        provider = await asyncio.to_thread(registry.for_background)
        if provider is None:
            return  # learning runs only on a configured background chain
        question, answer = await asyncio.to_thread(self._exchange, run)
        if not answer:
            return
        learned = await learning.learn_after_turn(
            self._memory, provider, db=self._db, session_key=session.key,
            recorded_mode=session.memory_mode, run_id=run.run_id, question=question,
            answer=answer, model=registry.config_of(provider.model_id))
        log.info("after-turn learning for %s: %d written, %d known%s", run.run_id,
                 learned.written, learned.known, " (the model failed)" if learned.failed else "")

    def _exchange(self, run: RunRow) -> tuple[str, str]:
        """The run's message and its final answer, from the transcript."""
        assert run.user_event_seq is not None
        with self._db.read() as conn:
            events = transcript.of_run(conn, run.session_key, run.run_id, run.user_event_seq)
        question = next((str(e.content.get("text", "")) for e in events if e.kind == "user"), "")
        answers = [str(e.content.get("text", "")) for e in events
                   if e.kind == "assistant" and not e.meta.get("partial")]
        return question, answers[-1] if answers else ""

    async def cancel_for(self, session_key: str) -> None:
        """Cancel the chat's chores (it is being deleted: nothing more may be filed under
        it) and wait for them to stop."""
        await _cancel([t for t, key in self._running.items() if key == session_key])

    async def close(self) -> None:
        await _cancel(list(self._running))


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
