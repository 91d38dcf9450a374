"""What a model call cost: its tokens counted into the day's usage totals (`store.usage`) at
the model's price (`price_in_per_mtok`, `price_out_per_mtok` of its entry; a model with no
price is counted unpriced, never free).

Every model call that completes is counted here: a turn's calls (`engine.loop`, priced from
the registry's live entry of the turn's model) and the after-turn learning chore's. The
totals hold no chat and no text, so Incognito and Temporary chats' calls count too (the
privacy locks guard memory and lasting work, not this). Counting is bookkeeping: a write
that fails is logged, without any text, and the caller goes on.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from hearth.config import ModelConfig
from hearth.models.types import Usage
from hearth.store import usage as usage_store
from hearth.store.db import Database, now

log = logging.getLogger(__name__)


async def count(db: Database, model_id: str, model: ModelConfig | None, usage: Usage) -> None:
    """Add one completed call of `model_id` to today's usage; never raises a database error."""
    def write(conn: Connection) -> None:
        usage_store.record(
            conn, model_id=model_id, tokens_in=usage.tokens_in, tokens_out=usage.tokens_out,
            price_in_per_mtok=model.price_in_per_mtok if model else None,
            price_out_per_mtok=model.price_out_per_mtok if model else None, now=now())

    try:
        await db.writing(write, durable=False)
    except DBAPIError as error:
        log.warning("a call of model %s was not counted in usage (%s)", model_id,
                    type(error).__name__)
