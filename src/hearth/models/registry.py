"""Which models exist: the configured ones, else the fall-backs found at start.

With no `[[models]]`, an `OPENAI_API_KEY`, an `ANTHROPIC_API_KEY`, or an Ollama server answering
on 127.0.0.1:11434 (in that order) become the chat chain. With none, `for_chat` answers None
and the turn ends saying how to add a model (`NO_MODEL_SENTENCE`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

import httpx

from hearth.config import Config, ModelConfig
from hearth.models.types import Provider

OLLAMA_URL = "http://127.0.0.1:11434"

NO_MODEL_SENTENCE = (
    "No model is set up, so this message could not be answered. Add one: set OPENAI_API_KEY "
    "or ANTHROPIC_API_KEY in the gateway's environment, start Ollama on 127.0.0.1:11434, or add "
    "a [[models]] entry to config.toml in the Hearth home folder; then restart the gateway and "
    "send the message again."
)


def fallback_models(environ: Mapping[str, str], probe_ollama: bool = True) -> list[ModelConfig]:
    found: list[ModelConfig] = []
    if environ.get("OPENAI_API_KEY"):
        found.append(
            ModelConfig(
                id="openai",
                provider="openai",
                base_url=environ.get("OPENAI_BASE_URL") or None,
                api_key_env="OPENAI_API_KEY",
                model=environ.get("HEARTH_OPENAI_MODEL", "gpt-4o-mini"),
            )
        )
    if environ.get("ANTHROPIC_API_KEY"):
        found.append(
            ModelConfig(
                id="anthropic",
                provider="anthropic",
                base_url=environ.get("ANTHROPIC_BASE_URL") or None,
                api_key_env="ANTHROPIC_API_KEY",
                model=environ.get("HEARTH_ANTHROPIC_MODEL", "claude-sonnet-4-5"),
            )
        )
    if not found and probe_ollama:
        ollama = _probe_ollama(environ.get("HEARTH_OLLAMA_URL", OLLAMA_URL))
        if ollama is not None:
            found.append(ollama)
    return found


def _probe_ollama(url: str) -> ModelConfig | None:
    try:
        answer = httpx.get(f"{url.rstrip('/')}/api/tags", timeout=1.0)
        answer.raise_for_status()
        names = [m.get("name") or m.get("model") for m in answer.json().get("models", [])]
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    names = [n for n in names if isinstance(n, str) and n]
    if not names:
        return None
    return ModelConfig(
        id="ollama", provider="openai", base_url=f"{url.rstrip('/')}/v1", api_key="ollama",
        model=names[0],
    )


def build_provider(model: ModelConfig, environ: Mapping[str, str]) -> Provider:
    if model.provider == "anthropic":
        from hearth.models.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            model_id=model.id,
            model_name=model.model,
            base_url=model.base_url,
            api_key=model.resolved_api_key(environ),
            max_output_tokens=model.max_output_tokens,
            timeout=model.timeout_seconds,
        )
    from hearth.models.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(
        model_id=model.id,
        model_name=model.model,
        base_url=model.base_url,
        api_key=model.resolved_api_key(environ),
        max_output_tokens=model.max_output_tokens,
        timeout=model.timeout_seconds,
    )


class ModelRegistry:
    """The models this gateway can call, built once at start."""

    def __init__(
        self,
        models: list[ModelConfig],
        chat_chain: list[str],
        environ: Mapping[str, str] | None = None,
        *,
        background_chain: list[str] | None = None,
    ) -> None:
        self._configs = {m.id: m for m in models}
        self._environ = os.environ if environ is None else environ
        self._lock = threading.Lock()  # providers are built in worker threads (SDK imports)
        self._providers: dict[str, Provider] = {}
        self.chat_chain = chat_chain or [m.id for m in models]
        self.background_chain = list(background_chain or [])

    @classmethod
    def from_config(
        cls, config: Config, environ: Mapping[str, str] | None = None
    ) -> ModelRegistry:
        environ = os.environ if environ is None else environ
        if config.models:
            return cls(config.models, config.chains.chat, environ,
                       background_chain=config.chains.background)
        return cls(fallback_models(environ), [], environ)

    def config_of(self, model_id: str) -> ModelConfig | None:
        return self._configs.get(model_id)

    def ids(self) -> list[str]:
        return list(self._configs)

    def for_chat(self, pinned: str | None = None) -> Provider | None:
        """The provider a chat's turn runs on: its pinned model, else the chat chain's head."""
        model_id = pinned if pinned in self._configs else None
        if model_id is None and self.chat_chain:
            model_id = self.chat_chain[0]
        if model_id is None:
            return None
        with self._lock:
            if model_id not in self._providers:
                self._providers[model_id] = build_provider(self._configs[model_id],
                                                           self._environ)
            return self._providers[model_id]

    def for_background(self) -> Provider | None:
        """The provider background chores (after-turn learning) run on: the background chain's
        head; None when no background chain is configured, and then they do not run."""
        if not self.background_chain or self.background_chain[0] not in self._configs:
            return None
        model_id = self.background_chain[0]
        with self._lock:
            if model_id not in self._providers:
                self._providers[model_id] = build_provider(self._configs[model_id],
                                                           self._environ)
            return self._providers[model_id]

    def warm(self) -> None:
        """Build the chat chain's head now. Importing an SDK takes a second or more, so the
        gateway does it in a worker thread at start rather than in the first turn."""
        self.for_chat()
