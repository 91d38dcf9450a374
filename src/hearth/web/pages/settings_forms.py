"""The Settings page's forms read into settings: a model, the chat chain, an agent, your name,
the spending limits.

Each reader takes the posted form and answers the validated value, or raises `Invalid` with a
sentence the page shows. A sentence never repeats an API key that was given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ValidationError

from hearth import settings
from hearth.config import (
    ModelConfig,
    NamedAgentConfig,
    SpendingLimits,
    SpendLimit,
    ToolPolicyConfig,
    base_url_problem,
)
from hearth.models.registry import OLLAMA_BASE_URL, OLLAMA_KEY

KINDS = {"openai": "OpenAI-compatible", "anthropic": "Anthropic", "ollama": "Ollama"}
PROFILES = ("minimal", "coding", "full")
MODEL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
AGENT_NAME = re.compile(settings.AGENT_NAME)
PROMPT_MAX = 20_000
TIMEOUT = ModelConfig.model_fields["timeout_seconds"].default  # a call's longest, unless said


class Invalid(Exception):
    """A form the page cannot take; `sentence` says what to change."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


def model_of(form: dict[str, str], existing: ModelConfig | None = None) -> ModelConfig:
    """The model the model form describes: every key a `[[models]]` entry has. Editing
    `existing`, a key left empty keeps the key it had."""
    kind = form.get("kind", "")
    if kind not in KINDS:
        raise Invalid("Pick the model's provider: OpenAI-compatible, Anthropic or Ollama.")
    model_id = form.get("id", "").strip()
    if not MODEL_ID.fullmatch(model_id):
        raise Invalid("A model's id is 1 to 64 letters, digits, '.', '_', ':' or '-' "
                      "(for example local or gpt-4o).")
    name = form.get("model", "").strip()
    if not 1 <= len(name) <= 200 or not name.isprintable():
        raise Invalid("Give the model's name as its provider knows it (for example "
                      "gpt-4o-mini or llama3.1), in at most 200 characters.")
    base_url = _base_url(form.get("base_url", "").strip()) or (
        OLLAMA_BASE_URL if kind == "ollama" else None)
    key, key_env = _key(form, kind, existing)
    try:
        return ModelConfig(
            id=model_id, provider="anthropic" if kind == "anthropic" else "openai",
            base_url=base_url, api_key=key, api_key_env=key_env, model=name,
            **_abilities(form), **_prices(form))
    except ValidationError as exc:
        raise Invalid(f"That model cannot be used: {settings.describe(exc)}.") from exc


def kind_of(model: ModelConfig) -> str:
    """The form's provider choice for a model set up: openai, anthropic or ollama."""
    if model.provider == "anthropic":
        return "anthropic"
    return "ollama" if model.base_url == OLLAMA_BASE_URL else "openai"


def form_of_model(model: ModelConfig) -> dict[str, str]:
    """The model form filled in with `model` (its key never: the form says it is kept)."""
    def number(value: float | None) -> str:
        return "" if value is None else f"{value:g}"

    return {"kind": kind_of(model), "id": model.id, "model": model.model,
            "base_url": "" if kind_of(model) == "ollama" else model.base_url or "",
            "api_key_env": model.api_key_env or "",
            "tools": "on" if model.tools else "off", "vision": "on" if model.vision else "",
            "context_window": str(model.context_window),
            "max_output_tokens": str(model.max_output_tokens),
            "timeout_seconds": "" if model.timeout_seconds == TIMEOUT else number(
                model.timeout_seconds),
            **{field: number(getattr(model, key)) for field, (key, _, _) in PRICES.items()}}


def _abilities(form: dict[str, str]) -> dict[str, object]:
    """Tools (on unless the form says off), vision, the context window, the output cap and
    the time a call may take; a number left empty is the config's default."""
    window = _whole(form, "context_window", "The context window", 1024, 10_000_000)
    cap = _whole(form, "max_output_tokens", "The most output tokens", 1, 1_000_000)
    if window is not None and cap is not None and cap > window:
        raise Invalid("The most output tokens cannot be more than the context window.")
    timeout = _whole(form, "timeout_seconds", "The time a call may take", 1, 86_400)
    given = {"context_window": window, "max_output_tokens": cap, "timeout_seconds": timeout}
    return {"tools": form.get("tools", "on") == "on", "vision": form.get("vision") == "on",
            **{key: value for key, value in given.items() if value is not None}}


def _whole(form: dict[str, str], field: str, what: str, low: int, high: int) -> int | None:
    raw = form.get(field, "").strip().replace(",", "").replace("_", "")
    if not raw:
        return None
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise Invalid(f"{what} is a whole number from {low:,} to {high:,}, or empty for "
                      "the usual.")
    return int(raw)


# the form's price fields: (the config's key, what it is per, in the sentence, its top)
PRICES = {
    "price_in": ("price_in_per_mtok", "input price", "per million tokens"),
    "price_out": ("price_out_per_mtok", "output price", "per million tokens"),
    "price_speech": ("price_speech_per_mchar", "read-aloud price", "per million characters"),
    "price_audio": ("price_audio_per_minute", "voice-note price", "per minute"),
}


def _prices(form: dict[str, str]) -> dict[str, float | None]:
    return {key: _price(form.get(field, ""), what, per)
            for field, (key, what, per) in PRICES.items()}


def _base_url(raw: str) -> str | None:
    """The base URL given, checked as config.toml's are (`config.base_url_problem`)."""
    if not raw:
        return None
    problem = base_url_problem(raw)
    if problem is not None:
        raise Invalid(f"{problem}.")  # the same sentence config.toml gets
    return raw.rstrip("/")


def _key(form: dict[str, str], kind: str, existing: ModelConfig | None
         ) -> tuple[str | None, str | None]:
    """(the key given, or the name of the variable holding it); neither given, `existing`'s
    (a model edited keeps its key)."""
    key = form.get("api_key", "").strip()
    env = form.get("api_key_env", "").strip().removeprefix("$")
    if key and env:
        raise Invalid("Give the API key or the name of the variable that holds it, not both.")
    if key and (len(key) > 500 or not key.isprintable() or " " in key):
        raise Invalid("An API key is one line of at most 500 characters, without spaces.")
    if env and not ENV_NAME.fullmatch(env):
        raise Invalid("The key's variable name is letters, digits and '_' (for example "
                      "OPENAI_API_KEY).")
    if not key and not env and existing is not None:
        return existing.api_key, existing.api_key_env
    if kind == "ollama" and not key and not env:
        key = OLLAMA_KEY
    return key or None, env or None


def _price(raw: str, which: str, per: str = "per million tokens") -> float | None:
    raw = raw.strip().removeprefix("$")
    if not raw:
        return None
    try:
        price = float(raw)
    except ValueError:
        price = -1.0
    if not 0 <= price <= 10_000:
        raise Invalid(f"The {which} is US dollars {per}, a number from 0 to 10000, or "
                      "empty when you do not know it.")
    return price


def chain_of(form: dict[str, str], known: Iterable[str], slots: int) -> list[str]:
    """The chat chain picked, in order, each model once; empty: every model, in order."""
    known = set(known)
    chain: list[str] = []
    for slot in range(1, slots + 1):
        picked = form.get(f"chain_{slot}", "").strip()
        if picked and picked not in known:
            raise Invalid(f"{picked!r} is not a model set up here; pick one from the list.")
        if picked and picked not in chain:
            chain.append(picked)
    return chain


def agent_of(form: dict[str, str], existing: NamedAgentConfig | None
             ) -> tuple[str, NamedAgentConfig]:
    """The named agent the agent form describes (allow and deny lists kept as they were)."""
    name = form.get("name", "").strip()
    if not AGENT_NAME.fullmatch(name):
        raise Invalid("An agent's name is 1 to 40 letters, digits, '_' or '-'.")
    prompt = form.get("system_prompt", "").strip().replace("\r\n", "\n")
    if len(prompt) > PROMPT_MAX:
        raise Invalid(f"A system prompt is at most {PROMPT_MAX:,} characters.")
    profile = form.get("profile", "")
    if profile not in (*PROFILES, ""):
        raise Invalid("Pick the agent's tools: minimal, coding, full, or the gateway's.")
    voice = form.get("voice", "").strip().replace("\r\n", "\n")
    if len(voice) > PROMPT_MAX:
        raise Invalid(f"A voice is at most {PROMPT_MAX:,} characters.")
    kept = existing.tools if existing else ToolPolicyConfig()
    tools = kept.model_copy(update={"profile": profile or None})
    base = existing or NamedAgentConfig()  # its model pin and name are kept as they were
    return name, base.model_copy(update={"system_prompt": prompt or None,
                                         "voice": voice or None, "tools": tools})


def user_name_of(form: dict[str, str]) -> str | None:
    """Your name as the agent is told it; empty: not told."""
    name = " ".join(form.get("user_name", "").split())
    if len(name) > settings.USER_NAME_MAX or not name.isprintable():
        raise Invalid(f"Your name is one line of at most {settings.USER_NAME_MAX} characters.")
    return name or None


def _dollars(form: dict[str, str], field: str, what: str) -> float | None:
    """A limit's field: empty is no limit, else US dollars of 0 or more."""
    text = form.get(field, "").strip().lstrip("$").replace(",", "")
    if not text:
        return None
    try:
        amount = float(text)
    except ValueError:
        amount = -1.0
    if not 0 <= amount < 1e9:
        raise Invalid(f"The {what} must be an amount in US dollars, like 5 or 0.50 (or "
                      "empty for no limit).")
    return amount


def _limit(form: dict[str, str], prefix: str, who: str) -> SpendLimit:
    return SpendLimit(usd_per_day=_dollars(form, f"{prefix}day", f"daily limit {who}"),
                      usd_per_month=_dollars(form, f"{prefix}month", f"monthly limit {who}"))


def limits_of(form: dict[str, str], agents: Iterable[str], apps: Iterable[str]
              ) -> SpendingLimits:
    """The spending limits the Spending form gives: overall, each job's, and one pair per
    agent and app shown (fields `agent:<name>:day`, `app:<name>:month`, …)."""
    overall = _limit(form, "all:", "overall")
    limits = SpendingLimits(
        usd_per_day=overall.usd_per_day, usd_per_month=overall.usd_per_month,
        each_job=_limit(form, "job:", "for each job"),
        agents={name: _limit(form, f"agent:{name}:", f'for the agent "{name}"')
                for name in agents},
        apps={name: _limit(form, f"app:{name}:", f'for the app "{name}"') for name in apps})
    return limits.model_copy(update={
        "agents": {k: v for k, v in limits.agents.items() if not v.empty},
        "apps": {k: v for k, v in limits.apps.items() if not v.empty}})
