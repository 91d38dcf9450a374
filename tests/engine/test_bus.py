"""The live bus's run waits: every waiter wakes when the run ends, a waiter that times out
leaves, and nothing is left behind once the last waiter has gone."""

from __future__ import annotations

import asyncio

from hearth.engine.delivery.events import Bus


def test_every_waiter_wakes_at_the_end_and_none_leaves_anything_behind() -> None:
    async def scenario() -> None:
        bus = Bus()
        patient = asyncio.create_task(bus.wait_run("run-1", 5))
        hasty = asyncio.create_task(bus.wait_run("run-1", 0.01))
        await hasty  # timed out; the patient waiter still waits
        assert not patient.done()
        bus.run_ended("run-1")
        await asyncio.wait_for(patient, 1)
        assert bus._run_ended == {} and dict(bus._waiters) == {}

    asyncio.run(scenario())


def test_a_wait_that_times_out_alone_leaves_nothing() -> None:
    async def scenario() -> None:
        bus = Bus()
        await bus.wait_run("run-2", 0.01)
        assert bus._run_ended == {} and dict(bus._waiters) == {}
        bus.run_ended("run-2")  # the run's end after nobody waits is harmless
        assert bus._run_ended == {}

    asyncio.run(scenario())
