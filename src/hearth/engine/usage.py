"""Counting a turn's model calls into the usage totals, at the price of the model the turn
runs on: its entry as the model registry holds it now, so a price set on the Settings page
counts from the next call (see `models.pricing`). Incognito and Temporary chats' calls are
counted too: the totals keep no chat and no text, and the privacy locks (`privacy.stores`)
guard the memory tables and lasting work, not this one."""

from __future__ import annotations

from hearth.engine.state import Turn
from hearth.models import pricing
from hearth.models.types import Usage


def count_call(turn: Turn, usage: Usage) -> None:
    """Add one completed model call of `turn` to today's usage; never ends the turn."""
    pricing.count(turn.db, turn.provider.model_id, turn.model_config, usage)
