"""Masking secrets: the one place that knows what a secret looks like and which ones we hold.

Owns `mask(text)`, which replaces with `[redacted]` every secret it knows of in `text`:
- the secrets this gateway holds, told to it by whoever holds them (`know`): each model's API
  key (the model registry, as Settings adds models; the dashboard's settings.json), the
  gateway token (`web.app`), the chat channels' secrets (the Telegram bot token, the webhook's
  signing secret and its callback URL's password), the values of MCP servers' secret-named
  environment variables. A key of 20 characters or more is masked by its first 12 too, as a
  provider that shortens a key shows it;
- the common shapes of keys and tokens, whoever's they are: `sk-…` (OpenAI, `sk-proj-…`,
  Anthropic's `sk-ant-…`, and a provider's starred echo of one), `Bearer …`, Slack `xox?-…`,
  GitHub `ghp_…`/`github_pat_…`, Google `AIza…`, AWS access key ids, Telegram bot tokens,
  Hearth's own app tokens (`hearth_app_…`: the gateway keeps only their hashes, so they are
  masked by their shape), the code of a one-time sign-in link (`/signin/link/…`, as a
  request's line in uvicorn's access log shows it), private-key blocks, a password in a URL,
  and a labelled value (`api_key=…`, `"token": "…"`).
The shapes run on RE2, so no text can make them backtrack: masking is linear in the text.

Text that leaves the process or is kept passes here at a few choke points: every tool call's
output and receipt, before the ledger, the transcript, a model or an agent CLI sees them
(`engine.turn.toolbatch.run_call`, the one way a tool runs: a file the agent reads that holds a
key is stored and sent masked, and the receipt says so), a model error's sentence when it is
made (`models.types.ModelError`), a run's ending (`engine.turn.endings.settle`,
`store.runs.finish`), a notice appended to a transcript (`store.transcript`), an audit row
(`store.audit`), an API error envelope (`web.http.errors`), and every log record (`mask_logs`).
What the user or the model wrote is theirs and is not touched here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

import re2

REDACTED = "[redacted]"
MIN_KNOWN = 8  # shorter values ("ollama", "none") are placeholders, not secrets
HEAD = 12  # a long key is masked by its first HEAD characters too
HEAD_FROM = 20

_lock = threading.Lock()
_known: tuple[str, ...] = ()  # longest first, so a key inside another is not half-masked
_heads: tuple[str, ...] = ()
_logs_masked = False

# Each shape is anchored on a literal head and has no nested repetition; RE2 runs them all in
# time linear in the text whatever it holds. Group 1, where there is one, is kept.
_SHAPES: tuple[tuple[Any, str], ...] = tuple((re2.compile(pattern), kept) for pattern, kept in (
    (r"(?s)-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----.*?"
     r"(?:-----END [A-Z ]{0,40}PRIVATE KEY-----|\z)", REDACTED),
    (r"\bsk-[A-Za-z0-9_\-]{0,40}\*{3,}[A-Za-z0-9_\-]{0,12}", REDACTED),  # a starred echo
    (r"\bsk-[A-Za-z0-9_\-]{16,}", REDACTED),  # OpenAI sk-/sk-proj-, Anthropic sk-ant-
    (r"\bgh[pousr]_[A-Za-z0-9]{16,}", REDACTED),
    (r"\bgithub_pat_[A-Za-z0-9_]{16,}", REDACTED),
    (r"\bxox[abposre]-[A-Za-z0-9\-]{10,}", REDACTED),
    (r"\bAIza[A-Za-z0-9_\-]{30,}", REDACTED),
    (r"\bhearth_app_[A-Za-z0-9_\-]{16,}", REDACTED),  # an app's token (engine.apps)
    (r"(/signin/link/)[A-Za-z0-9_\-]{8,}", rf"\1{REDACTED}"),  # a one-time sign-in link's code
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
    (r"(\bbot|\b)[0-9]{5,12}:[A-Za-z0-9_\-]{30,}", rf"\1{REDACTED}"),  # Telegram
    (r"(?i)(\bbearer[ \t]{1,8})[A-Za-z0-9\-._~+/]{8,}=*", rf"\1{REDACTED}"),
    (r"(?i)(\b[a-z][a-z0-9+.\-]{0,20}://[^\s/@:]{1,200}:)[^\s/@]{1,200}@", rf"\1{REDACTED}@"),
    (r"(?i)(\b(?:x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|"
     r"secret|password|token)[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?)[^\s\"',;]{8,}",
     rf"\1{REDACTED}"),
))
_ANY_SHAPE = re2.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in _SHAPES))

_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS",
                           "PAT", "CREDENTIAL", "CREDENTIALS", "AUTH"})


def know(*secrets: str | None) -> None:
    """Mask these values from now on, for as long as the process lives (a model removed in
    Settings stays masked: a turn that began on it may still fail with its key)."""
    global _known, _heads
    fresh = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_KNOWN}
    with _lock:
        if fresh <= set(_known):
            return
        known = set(_known) | fresh
        _known = tuple(sorted(known, key=len, reverse=True))
        _heads = tuple(sorted({k[:HEAD] for k in known if len(k) >= HEAD_FROM}))


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret (GITHUB_TOKEN)."""
    words = "".join(c if c.isalnum() else " " for c in name.upper()).split()
    return any(w in _SECRET_WORDS or w.endswith(("KEY", "TOKEN")) for w in words)


def mask(text: str, also: Iterable[str | None] = ()) -> str:
    """`text` with every secret known (and those in `also`) and every key shape replaced."""
    if not text:
        return text
    extra = tuple(s for s in also if s and len(s) >= MIN_KNOWN)
    for secret in (*sorted(extra, key=len, reverse=True), *_known):
        if secret in text:
            text = text.replace(secret, REDACTED)
    for head in (*(s[:HEAD] for s in extra if len(s) >= HEAD_FROM), *_heads):
        if head in text:
            text = text.replace(head, REDACTED)
    if _ANY_SHAPE.search(text) is None:  # most text holds none: one pass, not one per shape
        return text
    for pattern, kept in _SHAPES:
        text = pattern.sub(kept, text)
    return text


def mask_value(value: Any) -> Any:
    """A JSON-shaped value (dicts, lists, strings) with every string in it masked."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {key: mask_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask_value(item) for item in value)
    return value


# ---------------------------------------------------------------- logs

_FORMATTER = logging.Formatter()


class MaskingFilter(logging.Filter):
    """Masks a record's message, exception and stack text in place; never drops a record.

    A record with nothing to mask is left exactly as it was; one with a secret in its
    arguments keeps its format and gets the arguments masked (formatters that read `args`,
    as uvicorn's access log does, still work); else its message is replaced, formatted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = _message(record)
        if message is not None and mask(message) != message:
            record.args = _masked_args(record.args)
            message = _message(record)
            if message is not None and mask(message) != message:
                record.msg, record.args = mask(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text)
        if record.stack_info:
            record.stack_info = mask(record.stack_info)
        return True


def _message(record: logging.LogRecord) -> str | None:
    try:
        return record.getMessage()
    except (TypeError, ValueError):  # a bad format: the handler reports it, unformatted
        return None


def _masked_args(args: Any) -> Any:
    """A record's arguments with every string (and exception) that holds a secret masked."""
    def one(arg: Any) -> Any:
        if not isinstance(arg, str | BaseException):
            return arg
        text = str(arg)
        masked = mask(text)
        return arg if masked == text else masked

    if isinstance(args, tuple):
        return tuple(one(arg) for arg in args)
    if isinstance(args, dict):
        return {key: one(arg) for key, arg in args.items()}
    return args


def mask_logs() -> None:
    """Mask every log record this process makes from now on, as it is made.

    A filter on a logger sees only that logger's own records, not those of its children, and
    a filter on a handler misses handlers added later (a log file, a test's capture); masking
    where records are made covers every logger and every handler. Idempotent."""
    global _logs_masked
    with _lock:
        if _logs_masked:
            return
        _logs_masked = True
        made = logging.getLogRecordFactory()
        masking = MaskingFilter()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = made(*args, **kwargs)
            masking.filter(record)
            return record

        logging.setLogRecordFactory(factory)
