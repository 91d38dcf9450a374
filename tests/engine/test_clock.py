"""The engine's timed loops wait on the clock they are given: with a `FakeClock`
(tests/support/clock.py) the scheduler ticks, a lane's wait on another gateway's turn ends,
the held-uploads sweep looks and a replica's fence reckons only as far as the test advanced
it, so "nothing fired" is asserted without sleeping."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from sqlalchemy import select

from hearth.config import AttachmentsConfig
from hearth.engine.background import held_uploads
from hearth.sessions.lanes import BUSY_POLL_SECONDS, Lanes
from hearth.store import jobs as job_store
from hearth.store.schema import runs
from tests.engine_harness import make_config, make_engine
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.support.clock import FakeClock


def test_the_scheduler_ticks_only_as_the_clock_advances(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Ticked.")
    clock = FakeClock()
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url), clock=clock)
    with engine.db.write() as conn:
        job = job_store.add(conn, prompt="every minute", next_at=clock.now() - 1,
                            every_seconds=60, made_by="owner", principal="owner")

    async def fired() -> int:
        return len(await engine.db.reading(lambda conn: conn.execute(
            select(runs.c.run_id).where(runs.c.session_key == job.session_key)).all()))

    async def body() -> list[int]:
        await engine.start()  # the first tick, at once: the job was due
        try:
            await clock.until_paused("scheduler")
            seen = [await fired()]
            await clock.advance_here(58)  # 58 more ticks, none of them due
            seen.append(await fired())
            await clock.advance_here(3)  # past its next minute
            seen.append(await fired())
            return seen
        finally:
            await engine.close()

    assert asyncio.run(body()) == [1, 1, 2]


def test_a_lane_held_elsewhere_looks_again_when_the_poll_has_passed() -> None:
    clock = FakeClock()
    asked: list[str] = []
    answers: list[bool | None] = [None, False]  # held by another gateway, then nothing waits

    async def run_next(key: str) -> bool | None:
        asked.append(key)
        return answers.pop(0)

    async def body() -> list[int]:
        lanes = Lanes(1, run_next, clock)
        lanes.dispatch("chat")
        await clock.until_paused("lane:chat")  # held elsewhere: it waits on the clock
        seen = [len(asked)]
        await clock.advance_here(BUSY_POLL_SECONDS - 0.1)
        seen.append(len(asked))
        await clock.advance_here(0.1)
        seen.append(len(asked))
        await lanes.close()
        return seen

    assert asyncio.run(body()) == [1, 1, 2]


class Desk:
    """Records what the sweep asked to expire."""

    def __init__(self) -> None:
        self.before: list[float] = []

    async def expire(self, before: float) -> int:
        self.before.append(before)
        return 0


def test_the_held_uploads_sweep_looks_each_interval_of_the_clock() -> None:
    clock, desk = FakeClock(), Desk()
    settings = AttachmentsConfig(held_seconds=400)  # a look every 100 s

    async def body() -> list[int]:
        sweeping = asyncio.create_task(held_uploads.sweep_forever(desk, lambda: settings, clock),
                                       name="sweep")
        await clock.until_paused("sweep")
        seen = [len(desk.before)]
        await clock.advance_here(99)
        seen.append(len(desk.before))
        await clock.advance_here(1)
        seen.append(len(desk.before))
        sweeping.cancel()
        return seen

    assert asyncio.run(body()) == [0, 0, 1]
    assert abs(desk.before[0] - (clock.now() - 400)) < 5  # held 400 s by the clock's now


def test_a_replica_fences_itself_once_the_clock_passes_two_thirds_of_its_lease(
        tmp_path: Path) -> None:
    clock = FakeClock()
    engine = make_engine(tmp_path, make_config(None), clock=clock)
    replica = engine.replica
    assert replica.fence() is None
    beside = threading.Thread(target=clock.advance, args=(replica.lease * 0.6,))
    beside.start()
    beside.join()  # advanced from a thread off any loop, as beside an in-process gateway
    assert replica.fence() is None
    clock.advance(replica.lease * 0.1)
    assert replica.fence() is not None and "could not renew its lease" in (replica.fence() or "")
