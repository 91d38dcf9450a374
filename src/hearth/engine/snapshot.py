"""The settings snapshot: the one owner of the gateway's current config and model state.

A `Snapshot` holds the config the next turn runs from (config.toml's with the dashboard's kept
settings laid over it) and the model registry read from that very config, made together and
never changed: the Settings page's save makes a new one (`adopt`) and the engine swaps it in
whole (`Engine.adopt`), so the config and the models can never be of two different saves. A
turn keeps the snapshot it started with to its end. Every surface reads "which models" from one
place, `choices()` (the start, chat and Settings pages, /healthz, /v1/models, a chat's pick).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hearth.config import Config
from hearth.models.breakers import BreakerView
from hearth.models.registry import ModelRegistry
from hearth.sessions.chats import DEFAULT_AGENT, Choices


@dataclass(frozen=True)
class Snapshot:
    """A config and the registry read from it (`models.config is config`, or it is refused)."""

    config: Config
    models: ModelRegistry

    def __post_init__(self) -> None:
        if self.models.config is not self.config:
            raise ValueError("a snapshot's model registry must be read from its own config")

    @classmethod
    def first(cls, config: Config, environ: Mapping[str, str] | None = None) -> Snapshot:
        """The snapshot a gateway starts from (the fall-backs looked for once, here, when the
        config names no model)."""
        return cls(config, ModelRegistry.from_config(config, environ))

    def adopt(self, config: Config) -> Snapshot:
        """The next snapshot: `config` and the registry read from it, which keeps this one's
        providers for models that did not change and its breakers (their state)."""
        return Snapshot(config, self.models.adopt(config))

    def choices(self) -> Choices:
        """The models and agents a chat may be set to run on: this snapshot's (the models in
        the registry's order, the default agent always among the agents)."""
        agents = sorted({DEFAULT_AGENT, *self.config.agents})
        return Choices(models=tuple(self.models.ids()), agents=tuple(agents))

    def hears(self) -> bool:
        """Whether a model is set up to hear voice notes (`[chains] transcribe`)."""
        return bool(self.models.own_chain("transcribe"))

    def breakers(self) -> list[BreakerView]:
        """The breaker of each of `choices()`' models, in order (their state outlives the
        snapshot: the breakers are shared by every snapshot of the gateway)."""
        return self.models.breakers.views(list(self.choices().models))
