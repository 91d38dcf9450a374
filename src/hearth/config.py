"""Settings: `$HEARTH_HOME/config.toml` plus `HEARTH_*` environment overrides, validated.

Owns the shape of the configuration and the one place it is read. A bad file is a
`ConfigError` whose message names the key and the problem; the gateway does not start on it.
Model fall-backs (environment keys, a local Ollama) are resolved in `models.registry`, not here.
A model's `base_url` is checked here (`base_url_problem`), the one check config.toml,
settings.json and the Settings page's add-model form all use: a URL without its http:// or
https:// is refused at start with a sentence naming the model and the fix.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_SYSTEM_PROMPT = (
    "You are Hearth, the user's personal assistant. Answer plainly and briefly. "
    "Your tools work inside the chat's workspace folder; use them when the request needs "
    "files or commands, and say what you did."
)


BASE_URL_EXAMPLE = "http://localhost:11434/v1"
BASE_URL_MAX = 500
BASE_URL_SCHEME = ("base_url must start with http:// or https://, "
                   f"e.g. {BASE_URL_EXAMPLE}")
BASE_URL_ADDRESS = ("base_url must be one web address with a host name (and a port from 1 to "
                    f"65535, if any), without spaces, e.g. {BASE_URL_EXAMPLE}")


class ConfigError(Exception):
    """The configuration cannot be used; the message says which key and why."""


def base_url_problem(url: str) -> str | None:
    """What is wrong with `url` as a model's base_url, as the fix to make; None: nothing.

    The sentence never repeats the URL: it may carry a password (`https://user:pw@host`)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ in the host
        return BASE_URL_ADDRESS
    if parts.scheme.lower() not in ("http", "https") or not url.lower().startswith(
            f"{parts.scheme.lower()}://"):
        return BASE_URL_SCHEME
    if len(url) > BASE_URL_MAX or any(ch.isspace() for ch in url) or not parts.hostname:
        return BASE_URL_ADDRESS
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        return BASE_URL_ADDRESS
    return BASE_URL_ADDRESS if port == 0 else None


def _secret(given: str | None, env_name: str | None,
            environ: Mapping[str, str] | None) -> str | None:
    """A secret set in the file, else read from the environment variable it names."""
    if given:
        return given
    if env_name:
        return (os.environ if environ is None else environ).get(env_name)
    return None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GatewayConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    max_concurrent_turns: int = Field(4, ge=1, le=256)
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    # a request's headers must all arrive this soon after its first byte (or the connection's
    # opening); each wait for more of its body may last this long (see web.server, web.limits)
    header_timeout_seconds: float = Field(15.0, gt=0)
    body_timeout_seconds: float = Field(30.0, gt=0)
    # PostgreSQL's replicas: a gateway renews its lease every third of this; one not renewed
    # for this long is dead, and another resumes its turns (engine/background/replica.py)
    lease_seconds: float = Field(30.0, ge=1.5, le=600)


class ModelConfig(_Section):
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    provider: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: str | None = Field(None, repr=False)
    model: str = Field(min_length=1)
    tools: bool = True
    vision: bool = False  # it reads images (sent as image parts); else a notice says so
    context_window: int = Field(128_000, ge=1024)
    max_output_tokens: int = Field(8192, ge=1)
    timeout_seconds: float = Field(600.0, gt=0)
    # US dollars per million tokens; unset means unpriced (never "free") on the Usage page
    price_in_per_mtok: float | None = Field(None, ge=0)
    price_out_per_mtok: float | None = Field(None, ge=0)
    # read aloud per million characters, voice notes per minute; unset: OpenAI's tts-1 and
    # whisper-1 prices (models/pricing.py), never free
    price_speech_per_mchar: float | None = Field(None, ge=0)
    price_audio_per_minute: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _base_url_is_a_web_address(self) -> ModelConfig:
        problem = None if self.base_url is None else base_url_problem(self.base_url)
        if problem is not None:
            raise ValueError(f'Model "{self.id}": {problem}')
        return self

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.api_key, self.api_key_env, environ)


class ChainsConfig(_Section):
    chat: list[str] = Field(default_factory=list)
    code_tools: list[str] = Field(default_factory=list)
    background: list[str] = Field(default_factory=list)
    loops: list[str] = Field(default_factory=list)
    # speech to text (`/audio/transcriptions`): a voice note's words; empty: none is heard
    transcribe: list[str] = Field(default_factory=list)
    # text to speech (`/audio/speech`): the dashboard's Read aloud; empty: the browser's voice
    speak: list[str] = Field(default_factory=list)


class SpendLimit(_Section):
    """US dollars that may be spent on model calls per UTC day and per UTC month (None: no
    limit for that period); see models/spending.py."""

    usd_per_day: float | None = Field(None, ge=0)
    usd_per_month: float | None = Field(None, ge=0)

    @property
    def empty(self) -> bool:
        return self.usd_per_day is None and self.usd_per_month is None


class SpendingLimits(SpendLimit):
    """The spending limits of [limits]: overall (its own two keys), each job's, and per agent
    and per app by name. Saved on the Settings page, they replace config.toml's whole."""

    each_job: SpendLimit = Field(default_factory=SpendLimit)
    agents: dict[str, SpendLimit] = Field(default_factory=dict)
    apps: dict[str, SpendLimit] = Field(default_factory=dict)

    @property
    def none(self) -> bool:
        """No limit is set anywhere: no call is held to any (and none is estimated)."""
        return self.empty and self.each_job.empty and not any(
            not each.empty for each in (*self.agents.values(), *self.apps.values()))


SPENDING_KEYS = tuple(SpendingLimits.model_fields)


class LimitsConfig(_Section):
    # spending limits (SpendingLimits: the same keys, `spending` reads them as one)
    usd_per_day: float | None = Field(None, ge=0)
    usd_per_month: float | None = Field(None, ge=0)
    each_job: SpendLimit = Field(default_factory=SpendLimit)
    agents: dict[str, SpendLimit] = Field(default_factory=dict)
    apps: dict[str, SpendLimit] = Field(default_factory=dict)
    max_model_calls_per_turn: int = Field(50, ge=1)
    max_tool_calls_per_turn: int = Field(200, ge=0)
    recovery_attempts: int = Field(3, ge=0)
    # background model calls (titles, learning, summaries): at most so many an hour, and so
    # many for what one turn sets off (engine.background.budget); 0: no bound
    background_calls_per_hour: int = Field(60, ge=0)
    background_calls_per_turn: int = Field(4, ge=0)
    history_messages: int = Field(200, ge=2)
    shell_timeout_seconds: float = Field(60.0, gt=0)
    turn_timeout_seconds: float = Field(0.0, ge=0)  # 0: a turn runs until it is done
    unattended_idle_seconds: float = Field(900.0, gt=0)
    helper_seconds: float = Field(900.0, gt=0)  # a helper's turn running longer is stopped
    helper_depth: int = Field(2, ge=1, le=5)  # helpers of helpers of … a chat, at most
    helpers_running: int = Field(4, ge=1, le=32)  # a chat's helpers at work at once
    temporary_idle_seconds: float = Field(3600.0, gt=0)  # a Temporary chat idle this long ends
    tool_output_chars: int = Field(50_000, ge=1000)
    autocompact_pct: int = Field(80, ge=10, le=95)  # % of the window a chat's view compacts at
    # a model's breaker opens after this many failures in a row, and lets one call through
    # again after this pause (models.breakers)
    breaker_failures: int = Field(3, ge=1)
    breaker_pause_seconds: float = Field(30.0, ge=0)
    retry_after_max_seconds: float = Field(5.0, ge=0)  # a 429's wait honoured before failover

    @property
    def spending(self) -> SpendingLimits:
        """The spending limits alone."""
        return SpendingLimits.model_validate(self.model_dump(include=set(SPENDING_KEYS)))


class LearningConfig(_Section):
    """When a chat's exchanges are learned from (`engine.background.chores`): once it has
    been left alone `idle_seconds`, or after every `every_turns` completed turns, whichever
    comes first; each pass reads every exchange since the last."""

    every_turns: int = Field(20, ge=1)
    idle_seconds: float = Field(300.0, gt=0)


class AgentConfig(_Section):
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    user_name: str | None = Field(None, min_length=1, max_length=80)  # the owner, told the model
    bot_name: str = Field("Hearth", min_length=1, max_length=80)  # {{bot_name}} in instructions


class ToolPolicyConfig(_Section):
    """Which tools exist: a profile, narrowed by `allow` (when not empty), minus `deny`.
    Entries are tool names or shell-style patterns (`time__*`)."""

    profile: Literal["minimal", "coding", "full"] | None = None
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class NamedAgentConfig(_Section):
    system_prompt: str | None = None
    voice: str | None = None  # how it speaks, layered on its instructions (engine.agents)
    bot_name: str | None = Field(None, min_length=1, max_length=80)  # its {{bot_name}}
    workspace: str | None = None  # where its chats' tools work (absolute; else the gateway's)
    model: str | None = None  # the agent's pin: its turns run on this model, before the chain

    @model_validator(mode="after")
    def _workspace_is_absolute(self) -> NamedAgentConfig:
        if self.workspace is not None and not Path(self.workspace).expanduser().is_absolute():
            raise ValueError(f"an agent's workspace must be an absolute folder, not "
                             f"{self.workspace[:200]!r}")
        return self
    tools: ToolPolicyConfig = Field(default_factory=ToolPolicyConfig)


class ToolsConfig(ToolPolicyConfig):
    """[tools]: the global policy, and where and how tools run."""

    profile: Literal["minimal", "coding", "full"] | None = "coding"
    sandbox: Literal["auto", "on", "off"] = "auto"
    network: bool = False  # may a sandboxed shell reach the network
    elevated: bool = False  # may a call ask to run the shell outside the sandbox
    web_fetch_allow_hosts: list[str] = Field(default_factory=list)
    web_fetch_max_bytes: int = Field(2_000_000, ge=1024)
    web_fetch_timeout_seconds: float = Field(20.0, gt=0)


class StoreConfig(_Section):
    synchronous: Literal["NORMAL", "FULL"] = "FULL"


class McpServerConfig(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class TelegramConfig(_Section):
    """[channels.telegram]: a bot on Telegram, long polling (no public address needed)."""

    token_env: str | None = "TELEGRAM_BOT_TOKEN"
    token: str | None = Field(None, repr=False)
    base_url: str = "https://api.telegram.org/bot"  # the Bot API; the token is put after it
    owner_ids: list[int] = Field(default_factory=list)  # Telegram user ids of the owner
    poll_timeout_seconds: float = Field(25.0, ge=0, le=50)
    max_chars: int = Field(4096, ge=100, le=4096)

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.token, self.token_env, environ)


class WebhookConfig(_Section):
    """[channels.webhook]: any app is a channel: it POSTs signed messages in, and Hearth POSTs
    signed replies to its callback URL."""

    secret_env: str | None = "HEARTH_WEBHOOK_SECRET"
    secret: str | None = Field(None, repr=False)
    callback_url: str | None = None
    owner_ids: list[str] = Field(default_factory=list)  # the sender ids that are the owner
    max_chars: int = Field(4000, ge=100, le=100_000)
    max_age_seconds: float = Field(300.0, gt=0)  # an older timestamp is refused
    send_attempts: int = Field(6, ge=1, le=50)

    def resolved_secret(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.secret, self.secret_env, environ)


class SlackConfig(_Section):
    """[channels.slack]: a Slack app's bot. Slack POSTs events (`app_mention`, direct messages)
    to /channels/slack/events and button presses to /channels/slack/actions, each signed with
    the app's signing secret; answers go out through the Web API with the bot token."""

    bot_token_env: str | None = "SLACK_BOT_TOKEN"
    bot_token: str | None = Field(None, repr=False)
    signing_secret_env: str | None = "SLACK_SIGNING_SECRET"
    signing_secret: str | None = Field(None, repr=False)
    owner_ids: list[str] = Field(default_factory=list)  # Slack user ids (U…) of the owner
    api_url: str = "https://slack.com/api/"  # the Web API (a test's fake)
    max_chars: int = Field(3000, ge=100, le=40_000)
    max_age_seconds: float = Field(300.0, gt=0)  # an older request timestamp is refused

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.bot_token, self.bot_token_env, environ)

    def resolved_secret(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.signing_secret, self.signing_secret_env, environ)


class MatrixConfig(_Section):
    """[channels.matrix]: a bot account on a Matrix homeserver, long-polling /sync."""

    homeserver: str = Field(min_length=8)  # https://matrix.example.org
    user_id: str = Field(pattern=r"^@[^:\s]+:\S+$")  # the bot's account
    access_token_env: str | None = "MATRIX_ACCESS_TOKEN"
    access_token: str | None = Field(None, repr=False)
    owner_ids: list[str] = Field(default_factory=list)  # your Matrix user ids (@you:server)
    poll_timeout_seconds: float = Field(30.0, ge=0, le=120)
    max_chars: int = Field(16_000, ge=100, le=60_000)

    @model_validator(mode="after")
    def _homeserver_is_a_web_address(self) -> MatrixConfig:
        problem = base_url_problem(self.homeserver)
        if problem is not None:
            raise ValueError(f"channels.matrix.homeserver: {problem}")
        return self

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.access_token, self.access_token_env, environ)


class EmailConfig(_Section):
    """[channels.email]: mail in by SMTP (the gateway listens; your mail server hands it the
    bot's mail), answers out through your SMTP relay, each conversation one thread."""

    address: str = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    owner_addresses: list[str] = Field(default_factory=list)  # the senders who are you
    # an owner's mail is the owner's only with the word of your receiving mail server: the
    # Authentication-Results it adds under this authserv-id (RFC 8601), with a DKIM or SPF
    # pass for the From domain (channels.mail_auth); unset, every mail is a guest's
    authserv_id: str | None = Field(None, min_length=1, max_length=255,
                                    pattern=r'^[^\s;()"\\]+$')
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(2525, ge=0, le=65535)  # 0: any free port
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_starttls: bool = True
    smtp_user: str | None = None
    smtp_password_env: str | None = "HEARTH_SMTP_PASSWORD"
    smtp_password: str | None = Field(None, repr=False)
    max_chars: int = Field(20_000, ge=100, le=1_000_000)
    max_message_mb: float = Field(25.0, gt=0, le=1024)

    def resolved_password(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.smtp_password, self.smtp_password_env, environ)

    @model_validator(mode="before")
    @classmethod
    def _no_unproven_owner(cls, data: Any) -> Any:
        if isinstance(data, dict) and "require_authentication" in data:
            raise ValueError("require_authentication is gone: a From address is never proof "
                             "by itself. Remove it and set authserv_id to the id your "
                             "receiving mail server writes in Authentication-Results.")
        return data


class ChannelsConfig(_Section):
    telegram: TelegramConfig | None = None
    webhook: WebhookConfig | None = None
    slack: SlackConfig | None = None
    email: EmailConfig | None = None
    matrix: MatrixConfig | None = None


class AppsConfig(_Section):
    """[apps]: what one app (a token made by `hearth apps add`) may hold or use at once; the
    owner's requests never count against these (web.quotas, engine.background.app_quotas)."""

    jobs_per_app: int = Field(20, ge=1)  # jobs its chats made, paused ones included
    job_fires_per_hour: int = Field(60, ge=1)  # its jobs' fires in any hour, scheduled or run now
    turns_per_minute: int = Field(30, ge=1)  # requests that admit a turn, in any 60 seconds
    streams_per_token: int = Field(20, ge=1)  # event streams open at once
    # an app's request is refused while the gateway's open files are this close to its limit
    fd_reserve: int = Field(128, ge=0)
    attachments_mb: float = Field(512.0, gt=0)  # every file of the chats it started, together

    @property
    def attachments_bytes(self) -> int:
        return int(self.attachments_mb * 1024 * 1024)


class AttachmentsConfig(_Section):
    """Files, images and voice notes sent with a message (see sessions/attachments.py)."""

    max_file_mb: float = Field(25.0, gt=0, le=1024)  # one file, more is refused (413)
    max_message_mb: float = Field(50.0, gt=0, le=4096)  # every file one message names
    text_chars: int = Field(20_000, ge=1000, le=1_000_000)  # read of a text file or PDF
    chat_max_mb: float = Field(1024.0, gt=0)  # every file one chat keeps, sent and held
    held_per_chat: int = Field(100, ge=1)  # uploads one chat holds not sent yet
    held_seconds: float = Field(86_400.0, gt=0)  # an upload never sent is removed after this

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)

    @property
    def max_message_bytes(self) -> int:
        return int(self.max_message_mb * 1024 * 1024)

    @property
    def chat_max_bytes(self) -> int:
        return int(self.chat_max_mb * 1024 * 1024)


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float:
    """Seconds in a duration written like `30m`, `12h` or `1d` (also `45s`, `1.5h`);
    ValueError with the fix for anything else."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except (KeyError, ValueError):
        raise ValueError(f"{text!r} is not a duration: write a number and a unit, "
                         "e.g. 30m, 12h or 1d") from None
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a duration longer than nothing")
    return seconds


SEARCH_ADDRESSES = {"brave": "https://api.search.brave.com/res/v1/web/search",
                    "tavily": "https://api.tavily.com/search"}


class WebSearchConfig(_Section):
    """[web_search]: the `web_search` tool's provider (tools/web_search.py). SearXNG answers at
    the owner's own address (often loopback or the LAN: reached as configured); Brave and
    Tavily at theirs unless `base_url` says otherwise, with a key."""

    provider: Literal["searxng", "brave", "tavily"]
    base_url: str | None = None  # SearXNG's (required); Brave's or Tavily's API to use instead
    api_key_env: str | None = None
    api_key: str | None = Field(None, repr=False)
    max_results: int = Field(5, ge=1, le=20)
    timeout_seconds: float = Field(15.0, gt=0, le=120)
    usd_per_search: float | None = Field(None, ge=0)  # what the provider charges: on Usage
    temporary: bool = True  # may a Temporary chat search (its words leave for the provider)

    @model_validator(mode="after")
    def _reachable(self) -> WebSearchConfig:
        if self.provider == "searxng" and self.base_url is None:
            raise ValueError("a SearXNG provider needs its base_url (http://127.0.0.1:8888)")
        problem = None if self.base_url is None else base_url_problem(self.base_url)
        if problem is not None:
            raise ValueError(f"web_search: {problem}")
        return self

    @property
    def address(self) -> str:
        """Where the search is asked (SearXNG's `/search` under its base URL)."""
        if self.base_url is None:
            return SEARCH_ADDRESSES[self.provider]
        base = self.base_url.rstrip("/")
        return f"{base}/search" if self.provider == "searxng" else base

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.api_key, self.api_key_env, environ)


class BackupConfig(_Section):
    """Scheduled backups (see hearth/backup/): `every` (unset: none), the newest `keep`
    archives kept, in `to` (default $HEARTH_HOME/backups; a relative path is in the home)."""

    every: str | None = None  # a duration: 30m, 12h, 1d
    keep: int = Field(7, ge=1, le=1000)
    to: str | None = None

    @model_validator(mode="after")
    def _every_is_a_duration(self) -> BackupConfig:
        if self.every is not None:
            duration_seconds(self.every)
        return self

    @property
    def every_seconds(self) -> float | None:
        return None if self.every is None else duration_seconds(self.every)


class MetricsConfig(_Section):
    """[metrics]: `GET /metrics` takes the gateway's token, or this token of its own (for a
    scraper that should hold nothing else: it opens no other route)."""

    token_env: str | None = "HEARTH_METRICS_TOKEN"
    token: str | None = Field(None, repr=False)

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.token, self.token_env, environ)


class TelemetryConfig(_Section):
    """[telemetry]: traces of turns sent over OTLP/HTTP to a collector at this base address
    (its /v1/traces); None: only where OTEL_EXPORTER_OTLP_ENDPOINT says, else none."""

    otlp_endpoint: str | None = None


class Config(_Section):
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    models: list[ModelConfig] = Field(default_factory=list)
    chains: ChainsConfig = Field(default_factory=ChainsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    agents: dict[str, NamedAgentConfig] = Field(default_factory=dict)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    apps: AppsConfig = Field(default_factory=AppsConfig)
    attachments: AttachmentsConfig = Field(default_factory=AttachmentsConfig)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    web_search: WebSearchConfig | None = None
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)

    @model_validator(mode="after")
    def _chains_name_known_models(self) -> Config:
        known = {m.id for m in self.models}
        seen: set[str] = set()
        for index, model in enumerate(self.models):
            if model.id in seen:
                raise ValueError(f"models[{index}].id: {model.id!r} is used twice")
            seen.add(model.id)
        for chain_name, chain in self.chains.model_dump().items():
            for model_id in chain:
                if model_id not in known:
                    raise ValueError(
                        f"chains.{chain_name}: {model_id!r} is not the id of any [[models]] entry"
                    )
        return self


# Environment overrides: every scalar of [gateway], [limits] and [apps] (and store.synchronous) as
# HEARTH_<SECTION>_<KEY>; HEARTH_HOST and HEARTH_PORT are the documented short names and win
# when both are set.
_ALIASES = {"HEARTH_HOST": ("gateway", "host"), "HEARTH_PORT": ("gateway", "port")}


def _env_table() -> dict[str, tuple[str, str]]:
    table: dict[str, tuple[str, str]] = {}
    for section, model in (("gateway", GatewayConfig), ("limits", LimitsConfig),
                           ("apps", AppsConfig)):
        for key, field in model.model_fields.items():
            if field.annotation in (SpendLimit, dict[str, SpendLimit]):
                continue  # a table, not a scalar: set in config.toml or on the Settings page
            table[f"HEARTH_{section.upper()}_{key.upper()}"] = (section, key)
    table["HEARTH_STORE_SYNCHRONOUS"] = ("store", "synchronous")
    table.update(_ALIASES)  # last, so the short names win
    return table


def _env_overrides(
    environ: Mapping[str, str],
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The values the environment sets, by section, and which variable set each key."""
    found: dict[str, dict[str, str]] = {}
    origins: dict[str, str] = {}
    for var, (section, key) in _env_table().items():
        if var in environ:
            found.setdefault(section, {})[key] = environ[var]
            origins[f"{section}.{key}"] = var
    return found, origins


def _describe(error: ValidationError, env_vars: Mapping[str, str]) -> str:
    lines = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item["loc"]) or "(top level)"
        origin = env_vars.get(loc)
        where = f"{loc} (from {origin})" if origin else loc
        problem = item["msg"].removeprefix("Value error, ")
        if not item["loc"]:
            lines.append(problem)
            continue
        if item["type"] == "extra_forbidden":
            problem = "is not a setting Hearth knows (check the spelling)"
        lines.append(f"{where}: {problem}")
    return "; ".join(lines)


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read, merge and validate the configuration, or raise ConfigError naming the problem."""
    environ = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read: {exc}") from exc
    overrides, origins = _env_overrides(environ)
    for section, values in overrides.items():
        current = raw.get(section, {})
        if not isinstance(current, dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        raw[section] = {**current, **values}
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc, origins)}") from exc
