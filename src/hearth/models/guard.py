"""The call guard: the one door every model call passes through.

It counts calls per model and holds the privacy rule: inside a restricted chat's work only
the model its turn named may be called (`privacy.reach.check_model` raises
`OtherModelRefused` before anything is sent). No call site may reach a provider another way;
a census test holds that rule over the source tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

from hearth.models.types import ModelRequest, Provider, StreamEvent
from hearth.privacy import reach

calls_made: Counter[str] = Counter()


def stream(provider: Provider, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one model call through the guard."""
    reach.check_model(provider.model_id)
    calls_made[provider.model_id] += 1
    return provider.stream(request)
