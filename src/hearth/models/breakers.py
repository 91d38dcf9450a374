"""The circuit breakers: one per model, in memory, shared by turns and chores.

Owns whether a model is tried now. A breaker is `closed` (calls go through); it `open`s after
`failures` failures in a row (calls are refused without being sent); after `pause` seconds
one call is let through as a probe (`half-open`), and that call closes it (a success) or opens
it again (a failure). One `Breakers` lives as long as the gateway: the model registry hands it
on to each registry a new settings snapshot makes (`ModelRegistry.adopt`), and each registry
configures it with its snapshot's limits once, as it is made (never per turn).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half-open"]
FAILURES = 3
PAUSE_SECONDS = 30.0


@dataclass
class _Breaker:
    state: State = "closed"
    failures: int = 0  # in a row
    since: float = 0.0  # wall-clock time of the last change of state
    opened_at: float = 0.0  # monotonic: when it last opened
    probing: bool = False  # a half-open breaker's probe is out
    answered_at: float = 0.0  # wall-clock time of its last call that succeeded (0: none yet)


@dataclass(frozen=True)
class BreakerView:
    """One breaker as surfaces show it."""

    model_id: str
    state: State
    since: float  # seconds since the epoch (0: never changed)
    failures: int
    answered_at: float = 0.0  # seconds since the epoch of its last success (0: none yet)


class Breakers:
    """Every model's breaker; safe to use from the loop and from worker threads."""

    def __init__(self, failures: int = FAILURES, pause: float = PAUSE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = failures
        self.pause = pause
        self._clock = clock
        self._lock = threading.Lock()
        self._breakers: dict[str, _Breaker] = {}

    def configure(self, failures: int, pause: float) -> None:
        """Take the limits of a new settings snapshot (breakers keep their state)."""
        with self._lock:
            self.failures, self.pause = failures, pause

    def allows(self, model_id: str) -> bool:
        """May a call go to `model_id` now? An open breaker past its pause lets one probe
        through (it turns half-open); while the probe is out, others are refused."""
        with self._lock:
            breaker = self._breakers.get(model_id)
            if breaker is None or breaker.state == "closed":
                return True
            if breaker.state == "open" and self._clock() - breaker.opened_at >= self.pause:
                self._move(breaker, "half-open")
            if breaker.state == "half-open" and not breaker.probing:
                breaker.probing = True
                return True
            return False

    def ready_in(self, model_id: str) -> float:
        """Seconds until `allows` would let a call go to `model_id` (0: now), asked without
        taking the probe; a half-open breaker whose probe is out answers its pause."""
        with self._lock:
            breaker = self._breakers.get(model_id)
            if breaker is None or breaker.state == "closed":
                return 0.0
            if breaker.state == "open":
                return max(0.0, breaker.opened_at + self.pause - self._clock())
            return self.pause if breaker.probing else 0.0

    def succeeded(self, model_id: str) -> None:
        with self._lock:
            breaker = self._breakers.setdefault(model_id, _Breaker())
            breaker.answered_at = time.time()
            breaker.failures = 0
            breaker.probing = False
            if breaker.state != "closed":
                self._move(breaker, "closed")

    def failed(self, model_id: str) -> None:
        with self._lock:
            breaker = self._breakers.setdefault(model_id, _Breaker())
            breaker.failures += 1
            breaker.probing = False
            if breaker.state == "half-open" or breaker.failures >= self.failures:
                breaker.opened_at = self._clock()
                if breaker.state != "open":
                    self._move(breaker, "open")

    def state(self, model_id: str) -> BreakerView:
        with self._lock:
            breaker = self._breakers.get(model_id, _Breaker())
            return BreakerView(model_id, breaker.state, breaker.since, breaker.failures,
                               breaker.answered_at)

    def views(self, model_ids: list[str]) -> list[BreakerView]:
        return [self.state(model_id) for model_id in model_ids]

    def open_sentence(self, model_id: str) -> str:
        """Why a refused model was not tried, in a few words."""
        view = self.state(model_id)
        return f"its breaker is open after {view.failures} failures in a row"

    @staticmethod
    def _move(breaker: _Breaker, state: State) -> None:
        breaker.state = state
        breaker.since = time.time()
