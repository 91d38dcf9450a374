"""`hearth.tasks.cancel_and_wait`: every task given is cancelled and has ended (its cleanup
ran) when it returns; a task's own cancel is not the caller's, the caller's own is; a task
that ended by raising something else raises it, after every task has ended."""

from __future__ import annotations

import asyncio

import pytest

from hearth.tasks import cancel_and_wait


async def _cleaning_up(cleaned: list[str], name: str, pause: float = 0.05) -> None:
    """Work that runs until cancelled, then takes `pause` seconds to clean up."""
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.sleep(pause)
        cleaned.append(name)


def test_every_task_is_cancelled_and_has_ended_when_it_returns() -> None:
    async def scenario() -> list[str]:
        cleaned: list[str] = []
        tasks = [asyncio.create_task(_cleaning_up(cleaned, name)) for name in "abc"]
        await asyncio.sleep(0)
        await cancel_and_wait(tasks[0], None, *tasks[1:])
        assert all(task.cancelled() for task in tasks)
        return cleaned

    assert sorted(asyncio.run(scenario())) == ["a", "b", "c"]


def test_nothing_to_end_returns_at_once() -> None:
    asyncio.run(cancel_and_wait())
    asyncio.run(cancel_and_wait(None, None))


def test_a_task_that_ends_by_returning_when_cancelled_is_fine() -> None:
    async def shrugs() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return

    async def scenario() -> bool:
        task = asyncio.create_task(shrugs())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        return task.done() and not task.cancelled()

    assert asyncio.run(scenario())


def test_a_cancel_of_the_caller_itself_still_reaches_it() -> None:
    """The copies this replaced (`with suppress(CancelledError): await task`) swallowed it:
    a stop asked while a stop waited was lost."""
    async def scenario() -> str:
        cleaned: list[str] = []
        work = asyncio.create_task(_cleaning_up(cleaned, "work", pause=5.0))
        await asyncio.sleep(0)
        stopper = asyncio.create_task(cancel_and_wait(work))
        await asyncio.sleep(0.05)  # the stopper waits on the work's long cleanup
        stopper.cancel()
        try:
            await stopper
        except asyncio.CancelledError:
            outcome = "cancelled"
        else:
            outcome = "returned"
        work.cancel()
        await asyncio.wait([work])
        return outcome

    assert asyncio.run(scenario()) == "cancelled"


def test_a_task_that_raised_raises_here_after_every_task_ended() -> None:
    async def breaks_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    async def scenario() -> list[str]:
        cleaned: list[str] = []
        broken = asyncio.create_task(breaks_on_cancel())
        slow = asyncio.create_task(_cleaning_up(cleaned, "slow", pause=0.1))
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="cleanup failed"):
            await cancel_and_wait(broken, slow)
        assert slow.done()
        return cleaned

    assert asyncio.run(scenario()) == ["slow"]
