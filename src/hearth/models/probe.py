"""Testing a model: one real, tiny streamed call, told in one sentence.

Owns the Settings page's Test: a fresh provider for the model (with a short timeout), one
message through the call guard, and the outcome — what answered and how long it took, or the
provider's error sentence — masked by `hearth.masking`, the model's own key included, should
a provider repeat it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping

from hearth.config import ModelConfig
from hearth.masking import mask
from hearth.models import guard
from hearth.models.registry import build_provider
from hearth.models.types import (
    Completed,
    Message,
    ModelError,
    ModelRequest,
    StreamEvent,
    TextDelta,
)

PROMPT = "Reply with the word OK."
TIMEOUT_SECONDS = 20.0


async def probe(model: ModelConfig, environ: Mapping[str, str],
                timeout: float = TIMEOUT_SECONDS) -> tuple[bool, str]:
    """(answered, the sentence saying how) for one tiny call to `model`."""
    quick = model.model_copy(update={"timeout_seconds": timeout})
    try:
        provider = await asyncio.to_thread(build_provider, quick, environ)
        began = time.monotonic()  # the call's time, not the SDK's import
        async with asyncio.timeout(timeout):
            text, answered_as = await _read(guard.stream(
                provider, ModelRequest([Message("user", PROMPT)], [], max_output_tokens=16),
                purpose="probe"))
    except ModelError as error:
        return False, mask(f"{model.id} did not answer: {error.sentence}",
                           also=[model.resolved_api_key(environ)])
    except TimeoutError:
        return False, f"{model.id} did not answer within {timeout:.0f} s."
    seconds = time.monotonic() - began
    said = " ".join(text.split())
    said = said if len(said) <= 60 else said[:59] + "…"
    return True, mask(f"{model.id} answered “{said}” as {answered_as or model.model} in "
                      f"{seconds:.1f} s.", also=[model.resolved_api_key(environ)])


async def _read(events: AsyncIterator[StreamEvent]) -> tuple[str, str]:
    """The text of the answer and the model that gave it, read to its terminal event."""
    text, answered_as = "", ""
    async for event in events:
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, Completed):
            answered_as = event.model
    return text, answered_as

