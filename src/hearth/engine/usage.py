"""Counting a turn's model calls into the usage totals (`store.usage`), at the model's price.

Each completed model call adds its tokens to today's row for the model the turn runs on,
priced from that model's `[[models]]` entry (a model with no price is counted unpriced).
The row is a per-day, per-model total with no chat and no text, so every chat's calls are
counted, Incognito and Temporary ones included: the privacy locks (`privacy.stores`) guard
the memory tables and lasting work, not this one. Counting is bookkeeping: a write that fails
is logged (without any text) and the turn goes on.
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import DBAPIError

from hearth.config import Config, ModelConfig
from hearth.engine.state import Turn
from hearth.models.types import Usage
from hearth.store import usage as usage_store
from hearth.store.db import now

log = logging.getLogger(__name__)


def configured(config: Config, model_id: str) -> ModelConfig | None:
    """The configured model of that id (where its prices are), or None (a fall-back model)."""
    return next((m for m in config.models if m.id == model_id), None)


def count_call(turn: Turn, usage: Usage) -> None:
    """Add one completed model call of `turn` to today's usage; never ends the turn."""
    model_id = turn.provider.model_id
    model = configured(turn.config, model_id)
    try:
        with turn.db.write(durable=False) as conn:
            usage_store.record(
                conn, model_id=model_id, tokens_in=usage.tokens_in,
                tokens_out=usage.tokens_out,
                price_in_per_mtok=model.price_in_per_mtok if model else None,
                price_out_per_mtok=model.price_out_per_mtok if model else None, now=now())
    except DBAPIError as error:
        log.warning("a call of model %s was not counted in usage (%s)", model_id,
                    type(error).__name__)
