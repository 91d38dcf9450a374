"""The call guard: the one door every model call passes through.

Today it counts calls per model; the privacy rules (a restricted chat's work reaches only its
own turn's model) hook in here, so no call site may reach a provider another way. A census
test holds that rule over the source tree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

from hearth.models.types import ModelRequest, Provider, StreamEvent

calls_made: Counter[str] = Counter()


def stream(provider: Provider, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one model call through the guard."""
    calls_made[provider.model_id] += 1
    return provider.stream(request)
