"""An adapter's memory of what it sent or took in is bounded: the newest `most` are kept, a key
remembered again counts as new, and the oldest is let go first."""

from __future__ import annotations

from hearth.channels.base import remember


def test_the_newest_are_kept_and_the_oldest_let_go() -> None:
    kept: dict[str, int] = {}
    for n in range(5):
        remember(kept, f"k{n}", n, most=3)
    assert list(kept) == ["k2", "k3", "k4"]
    remember(kept, "k2", 20, most=3)  # again: now the newest
    remember(kept, "k5", 5, most=3)
    assert kept == {"k4": 4, "k2": 20, "k5": 5}
