"""The background budget: how many model calls background chores may make.

Titles, learning and idle summaries each cost a model call, and a model that answers them
badly would have them asked again and again. The budget bounds them two ways: at most
`background_calls_per_hour` calls in any hour (a sliding window, seeded at start from the
calls the store recorded in the last hour, so a restart does not reset it), and at most
`background_calls_per_turn` for what one turn set off (its title and the learning pass that
read it, their retries included). A call the budget refuses is not sent; the chore is owed,
uncounted, until the budget has room again (`ready_in`). The budget is this process's: on
PostgreSQL each replica keeps its own.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

from hearth.config import LimitsConfig
from hearth.models.chore_runner import Refused

HOUR = 3600.0
TURNS_KEPT = 1000  # turns whose count is remembered, the newest


class BackgroundBudget:
    def __init__(self, limits: Callable[[], LimitsConfig],
                 clock: Callable[[], float] = time.time) -> None:
        self._limits = limits  # the engine's current [limits]
        self._clock = clock
        self._calls: deque[float] = deque()  # when each call of the last hour was made
        self._by_turn: OrderedDict[str, int] = OrderedDict()

    def seed(self, made_at: Iterable[float]) -> None:
        """The calls made before this process started (their times), counted in the hour."""
        self._calls.extend(sorted(made_at))
        self._forget_old()

    def take(self, run_id: str | None) -> Refused | None:
        """Count one call for the turn `run_id` (None: no turn's), or say why the budget
        refuses it (nothing is counted then)."""
        limits = self._limits()
        self._forget_old()
        hourly = limits.background_calls_per_hour
        if hourly and len(self._calls) >= hourly:
            return Refused(f"not called: the background budget of {hourly} calls an hour "
                           "is spent", "budget")
        per_turn = limits.background_calls_per_turn
        spent = self._by_turn.get(run_id, 0) if run_id is not None else 0
        if per_turn and run_id is not None and spent >= per_turn:
            return Refused(f"not called: the turn it follows has had its {per_turn} "
                           "background calls", "turn_budget")
        self._calls.append(self._clock())
        if run_id is not None:
            self._by_turn[run_id] = spent + 1
            self._by_turn.move_to_end(run_id)
            while len(self._by_turn) > TURNS_KEPT:
                self._by_turn.popitem(last=False)
        return None

    def ready_in(self) -> float:
        """Seconds until the hourly budget has room for a call (0: it has now)."""
        hourly = self._limits().background_calls_per_hour
        self._forget_old()
        if not hourly or len(self._calls) < hourly:
            return 0.0
        return max(0.0, self._calls[len(self._calls) - hourly] + HOUR - self._clock())

    def for_turn(self, run_id: str | None) -> Allowance:
        return Allowance(self, run_id)

    def _forget_old(self) -> None:
        since = self._clock() - HOUR
        while self._calls and self._calls[0] <= since:
            self._calls.popleft()


class Allowance:
    """The budget as one chore's calls see it: each call asks `take` first."""

    def __init__(self, budget: BackgroundBudget, run_id: str | None) -> None:
        self._budget = budget
        self._run_id = run_id

    def take(self) -> Refused | None:
        return self._budget.take(self._run_id)
