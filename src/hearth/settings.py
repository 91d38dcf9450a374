"""The dashboard's settings: `$HEARTH_HOME/settings.json`, beside the user's `config.toml`.

Owns that file: its shape (validated with `config`'s models), reading it, writing it whole
(0600: a temporary file, then `os.replace`) and laying it over the loaded `Config`. Models
added in the dashboard come after config.toml's (config.toml's wins an id both name), a picked
chat chain replaces `chains.chat` and a kept background chain `chains.background` (a model
added here joins either only when asked: `placed`), agents edited here win over config.toml's
of the same name, the owner's name becomes `agent.user_name`, and spending limits saved here
(the Settings page, `/api/limits`, `hearth apps add --limit`) replace config.toml's spending
keys of `[limits]`.
config.toml is the user's file: never written. API keys given in the dashboard live only in
this file, and are told to the masker (`hearth.masking`) as the file is read, whether or not
their model ends up used.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hearth.atomic import write_atomically
from hearth.config import Config, ModelConfig, NamedAgentConfig, SpendingLimits
from hearth.masking import know

log = logging.getLogger(__name__)

FILE_NAME = "settings.json"
AGENT_NAME = r"^[A-Za-z0-9_-]{1,40}$"
USER_NAME_MAX = 80

_writing = threading.Lock()  # one read-change-write of the file at a time in this process


class SettingsError(Exception):
    """settings.json cannot be read or used; the message says why (never a key)."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelConfig] = Field(default_factory=list)
    chat_chain: list[str] | None = None  # None: config.toml's; []: every model, in order
    background_chain: list[str] | None = None  # None: config.toml's; []: the chat chain's
    agents: dict[str, NamedAgentConfig] = Field(default_factory=dict)
    user_name: str | None = Field(None, min_length=1, max_length=USER_NAME_MAX)
    limits: SpendingLimits | None = None  # None: config.toml's; else these, whole

    @model_validator(mode="after")
    def _ids_once(self) -> Settings:
        ids = [m.id for m in self.models]
        if len(ids) != len(set(ids)):
            raise ValueError("a model id is used twice")
        return self


def path_in(root: Path) -> Path:
    return root / FILE_NAME


def describe(error: ValidationError) -> str:
    """Where and what, never the value given (it may be a key)."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "the file"
        parts.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts[:5])


def load(path: Path) -> Settings:
    """The settings kept in `path` (none yet: empty), or SettingsError saying why not."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} cannot be read ({type(exc).__name__}); fix or remove "
                            "it, then reload.") from exc
    try:
        kept = Settings.model_validate_json(raw)
    except ValidationError as exc:
        raise SettingsError(f"{path} is not valid ({describe(exc)}); fix or remove it, "
                            "then reload.") from exc
    know(*(model.resolved_api_key() for model in kept.models))
    return kept


def save(path: Path, settings: Settings) -> None:
    """Write the file whole, readable by its owner only: a reader never sees half of it."""
    text = settings.model_dump_json(indent=2, exclude_none=True)
    write_atomically(path, (text + "\n").encode("utf-8"), mode=0o600)


def update(path: Path, change: Callable[[Settings], Settings]) -> Settings:
    """Read, change, validate and write the file as one step; `change` may raise to refuse."""
    with _writing:
        changed = change(load(path))
        try:
            changed = Settings.model_validate(changed.model_dump())
        except ValidationError as exc:
            raise SettingsError(f"These settings cannot be kept: {describe(exc)}.") from exc
        save(path, changed)
        return changed


async def loaded(path: Path) -> Settings:
    """`load`, awaited: the file read off the event loop (for a page)."""
    return await asyncio.to_thread(load, path)


async def updated(path: Path, change: Callable[[Settings], Settings]) -> Settings:
    """`update`, awaited: the file read, changed and written off the event loop."""
    return await asyncio.to_thread(update, path, change)


def overlay(config: Config, kept: Settings) -> tuple[Config, list[str]]:
    """`config` with the kept settings laid over it, and a sentence for each one left out."""
    raw = config.model_dump()
    known = [m.id for m in config.models]
    notes: list[str] = []
    for model in kept.models:
        if model.id in known:
            notes.append(f"The model {model.id!r} added in the dashboard is also in "
                         "config.toml; config.toml's is used.")
            continue
        raw["models"].append(model.model_dump())
        known.append(model.id)
    if kept.chat_chain is not None:
        raw["chains"]["chat"] = [m for m in kept.chat_chain if m in known]
        notes += [f"The chat chain names {m!r}, which is no model now; it is skipped."
                  for m in kept.chat_chain if m not in known]
    if kept.background_chain is not None:
        raw["chains"]["background"] = [m for m in kept.background_chain if m in known]
    raw["agents"].update({name: agent.model_dump() for name, agent in kept.agents.items()})
    if kept.user_name:
        raw["agent"]["user_name"] = kept.user_name
    if kept.limits is not None:
        raw["limits"].update(kept.limits.model_dump())
    try:
        return Config.model_validate(raw), notes
    except ValidationError as exc:
        raise SettingsError(f"The dashboard's settings do not fit config.toml: "
                            f"{describe(exc)}.") from exc


def _with(chain: list[str], model_id: str, wanted: bool) -> list[str]:
    """`chain` with `model_id` in it (kept where it is, else last) or without it."""
    if wanted:
        return chain if model_id in chain else [*chain, model_id]
    return [m for m in chain if m != model_id]


def placed(kept: Settings, model_id: str, chat_now: list[str], background_now: list[str], *,
           chat: bool, background: bool) -> Settings:
    """`kept` with `model_id` in the chat chain (after the models there: a fallback) only if
    `chat`, and doing background work only if `background`. `chat_now` is the chat chain in
    force (empty: no model was set up, so this first one is every chain's, whatever is
    asked), `background_now` the background chain set on its own (empty: background work
    runs on the chat chain). A chain "every model" stood for is written out, so a model
    added later never joins it unasked; SettingsError when a chain would be left empty."""
    if not chat_now:
        return kept
    chat_chain = _with(chat_now, model_id, chat)
    if not chat_chain:
        raise SettingsError(f"{model_id} is the only model of the chat chain, and chats need "
                            "one: put another model in the chat chain first.")
    chain: list[str] | None
    if background_now:
        chain = _with(background_now, model_id, background)
    elif background == (model_id in chat_chain):
        chain = kept.background_chain  # background work runs on the chat chain, as asked
    else:
        chain = _with(chat_chain, model_id, background)
    if not chain and not background and model_id in chat_chain:
        raise SettingsError(f"Background work runs on the chat chain, and {model_id} is its "
                            "only model: give background work another model first.")
    return kept.model_copy(update={"chat_chain": chat_chain, "background_chain": chain})


def with_limits(config: Config, change: Callable[[SpendingLimits], SpendingLimits]
                ) -> Callable[[Settings], Settings]:
    """A change of the kept settings that changes their spending limits, starting from
    config.toml's (`config`) the first time, so saving one limit loses none of the others."""
    def changed(kept: Settings) -> Settings:
        limits = kept.limits if kept.limits is not None else config.limits.spending
        return kept.model_copy(update={"limits": change(limits)})
    return changed


def apply(config: Config, root: Path) -> Config:
    """`config` with `<root>/settings.json` laid over it. A file that cannot be used is left
    as it is (the Settings page says why) and the gateway starts on config.toml alone."""
    try:
        merged, notes = overlay(config, load(path_in(root)))
    except SettingsError as error:
        log.error("%s The gateway starts without the dashboard's settings.", error)
        return config
    for note in notes:
        log.warning(note)
    return merged
