"""The last Test of each model (the Settings page's `probe`): whether it answered, its
sentence, and when, held in memory as long as the gateway runs.

Owns what the models table's State says after a Test: a model whose Test failed says so, and
why, until it is tested again, answers a real call (`BreakerView.answered_at`), or is changed
(a Test of other settings is not this model's). One `Checks` lives as long as the gateway:
the model registry hands it on to each registry a new settings snapshot makes, as it does
its breakers.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from hearth.config import ModelConfig


@dataclass(frozen=True)
class Checked:
    """One Test's outcome: `answered`, the sentence the page showed, its wall-clock time."""

    answered: bool
    sentence: str
    at: float
    tested: ModelConfig  # the model's settings as tested


class Checks:
    """Every model's last Test; safe to use from the loop and from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, Checked] = {}

    def record(self, model: ModelConfig, answered: bool, sentence: str) -> None:
        with self._lock:
            self._last[model.id] = Checked(answered, sentence, time.time(), model)

    def last(self, model: ModelConfig) -> Checked | None:
        """The last Test of `model` as it is set up now (None: never tested so)."""
        with self._lock:
            found = self._last.get(model.id)
        return found if found is not None and found.tested == model else None
