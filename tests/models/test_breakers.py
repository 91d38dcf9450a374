"""A model's breaker: open after N failures in a row, refuse while open, let one probe
through after the pause (half-open), close on its success or open again on its failure."""

from __future__ import annotations

from hearth.config import Config
from hearth.models.breakers import Breakers
from hearth.models.registry import ModelRegistry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_n_failures_in_a_row_and_a_success_resets_the_count() -> None:
    breakers = Breakers(failures=3, pause=30, clock=Clock())
    breakers.failed("a")
    breakers.failed("a")
    breakers.succeeded("a")  # the count is of failures in a row
    breakers.failed("a")
    breakers.failed("a")
    assert breakers.allows("a") and breakers.state("a").state == "closed"
    breakers.failed("a")
    assert breakers.state("a").state == "open" and not breakers.allows("a")
    assert breakers.allows("b")  # one breaker per model


def test_after_the_pause_one_probe_goes_through_and_its_success_closes() -> None:
    clock = Clock()
    breakers = Breakers(failures=1, pause=30, clock=clock)
    breakers.failed("a")
    clock.now += 29
    assert not breakers.allows("a")
    clock.now += 1
    assert breakers.allows("a")  # the probe
    assert breakers.state("a").state == "half-open"
    assert not breakers.allows("a")  # only one probe at a time
    breakers.succeeded("a")
    assert breakers.state("a").state == "closed" and breakers.allows("a")


def test_a_failed_probe_opens_it_again_for_another_pause() -> None:
    clock = Clock()
    breakers = Breakers(failures=2, pause=30, clock=clock)
    breakers.failed("a")
    breakers.failed("a")
    clock.now += 30
    assert breakers.allows("a")
    breakers.failed("a")  # the probe failed: open at once, whatever the count
    assert breakers.state("a").state == "open"
    clock.now += 29
    assert not breakers.allows("a")
    clock.now += 1
    assert breakers.allows("a")


def test_a_new_snapshot_keeps_the_breakers_and_takes_their_limits() -> None:
    raw = {"models": [{"id": "a", "model": "m", "api_key": "k"}],
           "limits": {"breaker_failures": 1}}
    registry = ModelRegistry.from_config(Config.model_validate(raw), {})
    registry.breakers.failed("a")
    assert registry.breakers.state("a").state == "open"
    raw["limits"] = {"breaker_failures": 5, "breaker_pause_seconds": 60}
    after = registry.adopt(Config.model_validate(raw))
    assert after.breakers is registry.breakers and after.breakers.state("a").state == "open"
    assert (after.breakers.failures, after.breakers.pause) == (5, 60)


def test_ready_in_says_when_a_call_may_go_without_taking_the_probe() -> None:
    clock = Clock()
    breakers = Breakers(failures=1, pause=30, clock=clock)
    assert breakers.ready_in("a") == 0.0  # never failed: closed
    breakers.failed("a")
    assert breakers.ready_in("a") == 30.0
    clock.now += 20
    assert breakers.ready_in("a") == 10.0
    clock.now += 10
    assert breakers.ready_in("a") == 0.0
    assert breakers.ready_in("a") == 0.0 and breakers.state("a").state == "open"  # asked only
    assert breakers.allows("a")  # the probe is still there to take
    assert breakers.ready_in("a") == 30.0  # while it is out, others wait
    breakers.succeeded("a")
    assert breakers.ready_in("a") == 0.0
