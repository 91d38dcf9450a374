"""What an endpoint offers: the model names its `GET /models` lists, for the Settings page's
model form to choose from.

Owns the one listing call: a fresh adapter for the endpoint (built off the event loop, as the
SDK's import is slow; a short timeout), its `listed()` (the official SDK's `models.list`,
every page), and the sentence saying why nothing could be listed (`Unlisted`) — the key
missing from the environment, the endpoint unreachable or refusing, too slow, or listing
nothing — masked by `hearth.masking`, the key given included, should a provider repeat it.
No message is sent, so nothing is spent and no chat's words go anywhere: it does not pass the
call guard, which holds model calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from hearth.config import ModelConfig
from hearth.masking import mask
from hearth.models import setup
from hearth.models.types import ModelError

TIMEOUT_SECONDS = 10.0
WHO = "The endpoint"  # what a listing's sentences call the endpoint asked


class Unlisted(Exception):
    """No model could be listed; `sentence` says why (never a key), `code` what kind of
    why: `key_missing` (a set-up mistake, nothing was asked) or `models_unlisted`."""

    def __init__(self, sentence: str, code: str = "models_unlisted") -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.code = code


class _Lister(Protocol):
    async def listed(self) -> list[str]: ...


def _lister(endpoint: ModelConfig, key: str) -> _Lister:
    """The adapter of the endpoint's provider (the SDK imported here: call off the loop)."""
    if endpoint.provider == "anthropic":
        from hearth.models.anthropic_provider import AnthropicProvider

        return AnthropicProvider(model_id=WHO, model_name=endpoint.model,
                                 base_url=endpoint.base_url, api_key=key,
                                 timeout=endpoint.timeout_seconds)
    from hearth.models.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(model_id=WHO, model_name=endpoint.model,
                                base_url=endpoint.base_url, api_key=key,
                                timeout=endpoint.timeout_seconds)


async def available(endpoint: ModelConfig, environ: Mapping[str, str],
                    timeout: float = TIMEOUT_SECONDS) -> list[str]:
    """The model names `endpoint` (its provider, base URL and key) offers, sorted; `Unlisted`
    saying why when there are none to choose from."""
    missing = setup.key_problem(endpoint, environ)
    if missing is not None:
        raise Unlisted(f"{endpoint.api_key_env} is not set in the gateway's environment, so "
                       "the endpoint's models cannot be listed: give the key itself, or set "
                       "the variable and restart the gateway.", "key_missing")
    key = endpoint.resolved_api_key(environ)
    quick = endpoint.model_copy(update={"timeout_seconds": timeout})
    lister = await asyncio.to_thread(_lister, quick, key or setup.KEYLESS)
    try:
        async with asyncio.timeout(timeout + 1):
            names = await lister.listed()
    except ModelError as error:
        raise Unlisted(mask(f"{error.sentence.rstrip('.')}.", also=[key])) from error
    except TimeoutError as error:
        raise Unlisted(f"{WHO} did not list its models within {timeout:.0f} s.") from error
    if not names:
        raise Unlisted(f"{WHO} answered, but lists no models.")
    return names
