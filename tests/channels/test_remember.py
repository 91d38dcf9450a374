"""An adapter's memory of what it sent or took in is bounded: the newest `most` are kept, a key
remembered again counts as new, and the oldest is let go first; a thread's lock is kept only
while someone holds it or waits for it."""

from __future__ import annotations

import asyncio

from hearth.channels.base import OneAtATime, remember


def test_the_newest_are_kept_and_the_oldest_let_go() -> None:
    kept: dict[str, int] = {}
    for n in range(5):
        remember(kept, f"k{n}", n, most=3)
    assert list(kept) == ["k2", "k3", "k4"]
    remember(kept, "k2", 20, most=3)  # again: now the newest
    remember(kept, "k5", 5, most=3)
    assert kept == {"k4": 4, "k2": 20, "k5": 5}


def test_one_at_a_time_holds_a_thread_and_forgets_it_when_free() -> None:
    """Two users of one key take turns, another key does not wait for them, and a key nobody
    holds or waits for is let go."""
    locks = OneAtATime()
    order: list[str] = []

    async def use(key: str, name: str, pause: float) -> None:
        async with locks.held(key):
            order.append(f"{name}+")
            await asyncio.sleep(pause)
            order.append(f"{name}-")

    async def all_three() -> None:
        await asyncio.gather(use("t1", "a", 0.05), use("t1", "b", 0), use("t2", "c", 0))

    asyncio.run(all_three())
    assert order.index("a-") < order.index("b+")  # b waited for a in t1
    assert order.index("c-") < order.index("a-")  # t2 did not wait for t1
    assert len(locks) == 0
