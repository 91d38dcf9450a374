"""Which models exist: the settings snapshot's, else the fall-backs found at start.

A registry is read from one settings snapshot's config and never changed: its models and
chains are that config's (`config.models`, `config.chains`), and it takes nothing else of them,
so the two cannot disagree (the engine holds both together: `engine.snapshot`). With no model in
the snapshot, an `OPENAI_API_KEY`, an `ANTHROPIC_API_KEY`, or an Ollama server answering on
127.0.0.1:11434 (in that order), found once at start, become the chat chain; they live here
alone, never in the settings. With none, `for_chat` answers None and the turn ends saying how
to add a model (`NO_MODEL_SENTENCE`). When the Settings page changes the snapshot, the engine
asks this registry for the next one (`adopt`), which keeps the providers already built for
models that did not change; a turn already running keeps the registry it started with.
Every model's API key is told to the masker (`hearth.masking.know`) as the model becomes
known, so no sentence ever shows it.

`resolve` answers the order a turn tries its models in (see `Resolution`): the model picked for
the chat, then its agent's pin, then the chain of the chat's use case (`AXES`; an empty chain is
the chat chain). A pick or pin that cannot run is left out of the order and said
(`Resolution.unavailable`), never rewritten. The registry hands its `Breakers` on to the next
snapshot's registry, so a model's breaker outlives a settings change (and so its last Test,
`checks`); each registry configures
them with its snapshot's limits as it is made, once (never per turn). `format_problem` says
whether a model's provider can hold a turn's answers to a response format (OpenAI's
`response_format`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hearth.config import Config, ModelConfig, base_url_problem
from hearth.masking import know
from hearth.models import setup
from hearth.models.breakers import Breakers
from hearth.models.checked import Checks
from hearth.models.types import Provider, ResponseFormat

log = logging.getLogger(__name__)
OLLAMA_URL = "http://127.0.0.1:11434"
OLLAMA_BASE_URL = f"{OLLAMA_URL}/v1"  # its OpenAI-compatible API, a model's base_url
OLLAMA_KEY = "ollama"  # Ollama takes any key; both SDKs insist on one

NO_MODEL_SENTENCE = (
    "No model is set up, so this message could not be answered. Add one on the dashboard's "
    "Settings page (it works at once), or set OPENAI_API_KEY or ANTHROPIC_API_KEY in the "
    "gateway's environment, start Ollama on 127.0.0.1:11434, or add a [[models]] entry to "
    "config.toml in the Hearth home folder and restart the gateway; then send the message again."
)


AXES = ("chat", "code_tools", "background", "loops")
OWN_USES = ("transcribe", "speak")  # uses no chat model stands in for (audio in, audio out)
AXIS_WORDS = {"chat": "chat", "code_tools": "code & tools", "background": "background",
              "loops": "loops"}


@dataclass(frozen=True)
class Candidate:
    """One model a turn may run on, and how it came to be in the order (the footer's words)."""

    model_id: str
    chosen_by: str


@dataclass(frozen=True)
class Resolution:
    """The models a turn tries, in order, once each; and the pick or pin that could not run
    (`unavailable`: who chose it, its id and why), which the turn says it ran without."""

    order: tuple[Candidate, ...]
    unavailable: tuple[tuple[str, str, str], ...] = ()

    def substitution(self, ran_on: str) -> str | None:
        """"Ran on X instead of Y: why." for the first choice that could not run."""
        if not self.unavailable:
            return None
        who, model_id, why = self.unavailable[0]
        return f"Ran on {ran_on} instead of {who} {model_id}: {why}."


def fallback_models(environ: Mapping[str, str], probe_ollama: bool = True) -> list[ModelConfig]:
    found = [model for model in (
        _from_environment(environ, "openai", "OPENAI", "gpt-4o-mini"),
        _from_environment(environ, "anthropic", "ANTHROPIC", "claude-sonnet-4-5"),
    ) if model is not None]
    if not found and probe_ollama:
        ollama = _probe_ollama(environ.get("HEARTH_OLLAMA_URL", OLLAMA_URL))
        if ollama is not None:
            found.append(ollama)
    return found


def _from_environment(environ: Mapping[str, str], provider: Literal["openai", "anthropic"],
                      prefix: str, default_model: str) -> ModelConfig | None:
    """The model `<prefix>_API_KEY` gives (at `<prefix>_BASE_URL`, named by
    `HEARTH_<prefix>_MODEL`), if the key is set; a base URL that is no web address leaves it
    out, saying why."""
    key_var, url_var = f"{prefix}_API_KEY", f"{prefix}_BASE_URL"
    if not environ.get(key_var):
        return None
    base_url = environ.get(url_var) or None
    problem = None if base_url is None else base_url_problem(base_url)
    if problem is not None:
        log.warning("%s %s; until it does, %s gives no model.",
                    url_var, problem.removeprefix("base_url "), key_var)
        return None
    return ModelConfig(id=provider, provider=provider, base_url=base_url, api_key_env=key_var,
                       model=environ.get(f"HEARTH_{prefix}_MODEL") or default_model)


def _probe_ollama(url: str) -> ModelConfig | None:
    import httpx  # asked only when no model is set up

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
        id="ollama", provider="openai", base_url=f"{url.rstrip('/')}/v1", api_key=OLLAMA_KEY,
        model=names[0], vision=_ollama_sees(url, names[0]),
    )


def _ollama_sees(url: str, name: str) -> bool:
    """Whether Ollama says the model reads images (`/api/show`'s `capabilities`)."""
    import httpx

    try:
        answer = httpx.post(f"{url.rstrip('/')}/api/show", json={"model": name}, timeout=1.0)
        answer.raise_for_status()
        capabilities = answer.json().get("capabilities") or []
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
    return isinstance(capabilities, list) and "vision" in capabilities


def build_provider(model: ModelConfig, environ: Mapping[str, str]) -> Provider:
    """The provider of `model`; one whose named key is missing gets `setup.NoKey`, whose
    calls end saying so: no SDK client is made for it."""
    missing = setup.key_problem(model, environ)
    if missing is not None:
        return setup.NoKey(model, missing)
    key = model.resolved_api_key(environ) or setup.KEYLESS
    if model.provider == "anthropic":
        from hearth.models.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            model_id=model.id,
            model_name=model.model,
            base_url=model.base_url,
            api_key=key,
            max_output_tokens=model.max_output_tokens,
            timeout=model.timeout_seconds,
        )
    from hearth.models.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(
        model_id=model.id,
        model_name=model.model,
        base_url=model.base_url,
        api_key=key,
        max_output_tokens=model.max_output_tokens,
        timeout=model.timeout_seconds,
    )


class ModelRegistry:
    """The models one settings snapshot names (or the fall-backs), their chains and providers:
    all read from that snapshot's config, so the registry cannot disagree with it."""

    def __init__(
        self,
        config: Config,
        environ: Mapping[str, str] | None = None,
        *,
        breakers: Breakers | None = None,
        checks: Checks | None = None,
        fallbacks: list[ModelConfig] | None = None,
        providers: dict[str, Provider] | None = None,
    ) -> None:
        """The registry of `config`: its keys read from `environ`, `breakers` shared with the
        registries before it (configured here, once, with the snapshot's limits; their state
        kept), `fallbacks` found at start, `providers` kept from the registry before it."""
        self.config = config
        self._environ = os.environ if environ is None else environ
        self._fallbacks = list(fallbacks or [])  # found at start; used while no model is set
        chosen = config.models or self._fallbacks
        self._configs = {m.id: m for m in chosen}
        know(*(m.resolved_api_key(self._environ) for m in chosen))  # masked wherever shown
        self._lock = threading.Lock()  # providers are built in worker threads (SDK imports)
        self._providers = dict(providers or {})
        chains: dict[str, list[str]] = config.chains.model_dump()
        known = [m for m in chains["chat"] if m in self._configs] if config.models else []
        hearers = {m for use in OWN_USES for m in chains.get(use) or []}  # never a chat's model
        # not picked: every model, in order (but those set up to transcribe)
        self.chat_chain = known or [m for m in self._configs if m not in hearers]
        self._chains = {axis: [m for m in chains.get(axis) or [] if m in self._configs]
                        for axis in (*AXES, *OWN_USES)}
        self.background_chain = self.chain("background")  # chores run on it; else chat's first
        self.breakers = breakers or Breakers()
        self.breakers.configure(config.limits.breaker_failures,
                                config.limits.breaker_pause_seconds)
        self.checks = checks or Checks()  # each model's last Test (the Settings page's)

    @classmethod
    def from_config(
        cls, config: Config, environ: Mapping[str, str] | None = None
    ) -> ModelRegistry:
        """The registry of the snapshot a gateway starts from: the fall-backs are looked for
        once, here, when the snapshot names no model."""
        environ = os.environ if environ is None else environ
        fallbacks = [] if config.models else fallback_models(environ)
        return cls(config, environ, fallbacks=fallbacks)

    def adopt(self, config: Config) -> ModelRegistry:
        """The registry of a new snapshot: the fall-backs found at start stand while it names
        no model, the providers built for models that did not change are kept, and so are the
        breakers (their state; their limits become the new snapshot's)."""
        with self._lock:
            kept = {model_id: provider for model_id, provider in self._providers.items()
                    if _same(self._configs.get(model_id), config, self._fallbacks, model_id)}
        return ModelRegistry(config, self._environ, breakers=self.breakers,
                             checks=self.checks, fallbacks=self._fallbacks, providers=kept)

    def config_of(self, model_id: str) -> ModelConfig | None:
        return self._configs.get(model_id)

    def ids(self) -> list[str]:
        return list(self._configs)

    def for_chat(self, pinned: str | None = None) -> Provider | None:
        """The provider a chat's turn runs on: its pinned model, else the chat chain's head."""
        with self._lock:
            model_id = pinned if pinned in self._configs else None
            if model_id is None and self.chat_chain:
                model_id = self.chat_chain[0]
            return self._provider(model_id)

    def chain(self, axis: str) -> list[str]:
        """The chain of a use case (`AXES`): its own, else the chat chain; background work
        with no chain of its own runs on the chat chain's first model alone, never failing
        over onto a model the owner did not put there for it (a priced fallback)."""
        own = self._chains.get(axis)
        if own:
            return list(own)
        return self.chat_chain[:1] if axis == "background" else list(self.chat_chain)

    def own_chain(self, axis: str) -> list[str]:
        """The chain set up for `axis` alone (a use no chat model stands in for, such as
        `transcribe`): empty when none is."""
        return list(self._chains.get(axis) or [])

    def problem(self, model_id: str) -> str | None:
        """Why `model_id` cannot run as it is set up (not set up, its key missing); None: it
        can."""
        model = self._configs.get(model_id)
        if model is None:
            return "it is not set up (Settings → Models)"
        if setup.key_problem(model, self._environ) is not None:
            return f"its key ({model.api_key_env}) is not set in the gateway's environment"
        return None

    def format_problem(self, model_id: str, wanted: ResponseFormat) -> str | None:
        """Why `model_id` cannot hold its answers to the response format `wanted` (its
        provider's structured output takes no such format); None: it can, or it is not set
        up (its turn then ends saying so)."""
        model = self._configs.get(model_id)
        return wanted.problem_with(model.provider) if model is not None else None

    def resolve(self, axis: str, picked: str | None = None, pinned: str | None = None,
                agent: str | None = None) -> Resolution:
        """The order a turn on `axis` tries its models in: the chat's pick, the agent's pin,
        then the axis's chain (the snapshot's; an empty one is the chat chain), each once; a
        pick or pin that cannot run is left out, and said."""
        chain = self.chain(axis)
        axis = axis if self._chains.get(axis) else "chat"
        order: list[Candidate] = []
        unavailable: list[tuple[str, str, str]] = []
        agent_words = f"the {agent or 'default'} agent's"
        for chosen_by, who, model_id in (
                ("this chat's own model", "this chat's pick", picked),
                (f"{agent_words} own model", f"{agent_words} model", pinned)):
            if not model_id or any(c.model_id == model_id for c in order):
                continue
            why = self.problem(model_id)
            if why is None:
                order.append(Candidate(model_id, chosen_by))
            else:
                unavailable.append((who, model_id, why))
        words = AXIS_WORDS.get(axis, axis)
        left_out = {model_id for _, model_id, _ in unavailable}
        for position, model_id in enumerate(chain):
            if model_id not in left_out and all(c.model_id != model_id for c in order):
                place = "first" if position == 0 else "next"
                order.append(Candidate(model_id, f"{place} in the {words} chain"))
        return Resolution(tuple(order), tuple(unavailable))

    def provider(self, model_id: str) -> Provider | None:
        """The provider of a known model (built once); None for an unknown id."""
        with self._lock:
            return self._provider(model_id)

    def for_background(self) -> Provider | None:
        """The provider background chores run on first: the background chain's head (an empty
        background chain is the chat chain's first model); None only when no model is set up."""
        with self._lock:
            return self._provider(self.background_chain[0] if self.background_chain else None)

    def _provider(self, model_id: str | None) -> Provider | None:
        """The provider of a known model, built once (the caller holds the lock)."""
        if model_id is None or model_id not in self._configs:
            return None
        if model_id not in self._providers:
            self._providers[model_id] = build_provider(self._configs[model_id], self._environ)
        return self._providers[model_id]

    def warm(self) -> None:
        """Build the chat chain's head now. Importing an SDK takes a second or more, so the
        gateway does it in a worker thread at start rather than in the first turn."""
        self.for_chat()


def _same(before: ModelConfig | None, config: Config, fallbacks: list[ModelConfig],
          model_id: str) -> bool:
    """Is the model `model_id` the same in the new snapshot as it was?"""
    after = {m.id: m for m in (config.models or fallbacks)}.get(model_id)
    return before is not None and after == before
