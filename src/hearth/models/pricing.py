"""What a model call cost: its tokens at the prices of the model that answered
(`price_in_per_mtok`, `price_out_per_mtok` of its entry). A model with no price, or with only
one of the two, is unpriced: None, never 0.

The call guard prices each call once, when its stream ends, and writes the figure on the
call's row (`models.calls`); Usage adds the rows up. Nothing else prices a call.
"""

from __future__ import annotations

from hearth.config import ModelConfig
from hearth.models.types import Usage
from hearth.store.usage import cost_of


def price(model: ModelConfig | None, usage: Usage) -> float | None:
    """US dollars for one call's `usage` at `model`'s prices; None when it has none."""
    if model is None:
        return None
    return cost_of(usage.tokens_in, usage.tokens_out, model.price_in_per_mtok,
                   model.price_out_per_mtok)
