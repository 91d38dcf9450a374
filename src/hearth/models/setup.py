"""Whether a model is set up so it can be called, and what to do when it is not.

Owns the set-up problems found before any call is made: a model whose `api_key_env` names a
variable that is not set (or is empty) in the gateway's environment. `problems` lists them
for the gateway's start (each logged once, by `engine.compose`); `key_problem` is the one
model's sentence; `NoKey` is the provider such a model gets instead of an SDK client, so its
turns end saying that same sentence and no placeholder key is ever sent in place of the one
it names. A model set up with no key at all (a local server that asks for none) is sent
`KEYLESS`, because both SDKs insist on some key; the environment's OPENAI_API_KEY or
ANTHROPIC_API_KEY is never picked up in its place.
(A base_url without its scheme is refused earlier, as the configuration is read:
`config.base_url_problem`.)
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping

from hearth.config import Config, ModelConfig
from hearth.models.types import KeyMissing, ModelRequest, StreamEvent

KEYLESS = "not-needed"  # what a model set up without any key is sent


def key_problem(model: ModelConfig, environ: Mapping[str, str]) -> str | None:
    """The sentence saying the key `model` names is missing; None when it has its key or
    names none."""
    if model.api_key or not model.api_key_env:
        return None
    value = environ.get(model.api_key_env)
    if value is not None and value.strip():
        return None
    state = "is not set" if value is None else "is empty"
    return (f'Model "{model.id}": {model.api_key_env} {state} in the gateway\'s environment; '
            "set it and restart, or remove the model.")


def problems(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """One sentence for each model of `config` that cannot be called as it is set up."""
    environ = os.environ if environ is None else environ
    found = (key_problem(model, environ) for model in config.models)
    return [sentence for sentence in found if sentence is not None]


class NoKey:
    """The provider of a model whose key is missing: every call ends at once with the set-up
    sentence, before anything is sent."""

    def __init__(self, model: ModelConfig, sentence: str) -> None:
        self.model_id = model.id
        self.model_name = model.model
        self.provider: str = model.provider
        self.sentence = sentence

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise KeyMissing(self.sentence)
        yield  # pragma: no cover - never reached; makes this an async generator, as Provider's
