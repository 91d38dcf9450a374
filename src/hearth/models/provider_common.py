"""What the provider adapters share: their failures' sentences and their tool arguments.

Owns, for openai_compat.py and anthropic_provider.py alike:
- `request_error`: an SDK's failure to start an answer mapped to the project's model errors
  (an HTTP error status, a connection that failed, any other SDK error) and their sentences,
  which name the URL that was tried (`tried_url`: no user, password, query or fragment, so
  no key rides along) and, for a 404, what the adapter's hint says to try
  (`openai_not_found_hint`: add /v1; `anthropic_not_found_hint`: drop it);
- `stream_broke` and `stream_unfinished`: the AnswerCutOff sentences for a stream that broke,
  or ended before the provider's terminal event;
- `brief`: an SDK error in a few words, secrets masked (`hearth.masking`) before it is cut;
- `model_names`: the names an endpoint's `GET /models` listed, once each, in order, at most
  `LISTED_MAX` (what the Settings page's model form offers to choose from);
- `tool_arguments`: a tool call's JSON arguments as a dict, anything else kept as
  `{"_invalid_json": raw}` so the loop can tell the model what it sent; either way with every
  lone surrogate (a model may send `\ud800` as a JSON escape) made U+FFFD, so the arguments
  are valid UTF-8 wherever they go (the ledger, an approval, a view);
It imports no SDK: each adapter names its own SDK's exception classes (`SdkErrors`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hearth.masking import mask
from hearth.models.types import (
    AnswerCutOff,
    ModelError,
    ProviderUnavailable,
    ProviderUnreachable,
)

BRIEF_CHARS = 300
LISTED_MAX = 1000  # the most model names one listing answers
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads pairs the halves it can


@dataclass(frozen=True)
class SdkErrors:
    """An SDK's exception classes, as `request_error` tells its failures apart."""

    status: type[Exception]  # the provider answered with an HTTP error (has `status_code`)
    connection: type[Exception]  # the provider was never reached (timeouts included)


def request_error(model_id: str, exc: Exception, sdk: SdkErrors,
                  not_found_hint: str = "") -> ProviderUnavailable:
    """The model error for an SDK error raised before any answer began; a 404's sentence
    says `not_found_hint` (what to change) when there is one."""
    url = tried_url(exc)
    at = f" at {url}" if url else ""
    if isinstance(exc, sdk.status):
        status_code = getattr(exc, "status_code", None)
        if status_code == 404 and not_found_hint:
            refused = ProviderUnavailable(
                f"{model_id} answered HTTP 404{at}; {not_found_hint} (it said: {brief(exc)})")
        else:
            refused = ProviderUnavailable(
                f"{model_id} answered HTTP {status_code}{at}: {brief(exc)}")
        refused.status = status_code if isinstance(status_code, int) else None
        refused.retry_after = retry_after(exc)
        return refused
    if isinstance(exc, sdk.connection):
        return ProviderUnreachable(f"{model_id} could not be reached{at}: {brief(exc)}")
    return ProviderUnavailable(f"{model_id} could not be reached{at}: {brief(exc)}")


def retry_after(exc: Exception) -> float | None:
    """The seconds an HTTP error's Retry-After header asks for (a number of seconds only;
    None when there is none or it is a date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or seconds < 0 else seconds


def tried_url(exc: Exception) -> str:
    """The URL the failed request went to (an SDK error carries its request), shown without
    what may be secret; empty when the error does not say."""
    url = getattr(getattr(exc, "request", None), "url", None)
    return "" if url is None else shown_url(str(url))


async def model_names(model_id: str, listed: AsyncIterator[object]) -> list[str]:
    """The `id`s of the models a listing yields (an SDK's paginator), once each, sorted
    case-blind, at most `LISTED_MAX`; an item without a printable id is passed over. A
    ModelError when what `model_id`'s endpoint answered is no list the SDK can page."""
    names: dict[str, None] = {}
    try:
        async for item in listed:
            name = getattr(item, "id", None)
            if isinstance(name, str) and name.strip() and name.isprintable() \
                    and len(name) <= 200:
                names[name.strip()] = None
            if len(names) >= LISTED_MAX:
                break
    except (ValueError, AttributeError, TypeError) as exc:  # no list: the SDK cannot page it
        raise ModelError(f"{model_id} answered GET /models with something other than a "
                         "list of models.") from exc
    return sorted(names, key=str.casefold)


def shown_url(url: str) -> str:
    """`url` without its user and password, its query and its fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def openai_not_found_hint(base_url: str | None) -> str:
    """For an OpenAI-compatible base_url that does not end in /v1: try it with /v1."""
    if base_url is None:
        return ""
    base = shown_url(base_url).rstrip("/")
    if not base or base.endswith("/v1"):
        return ""
    return (f"OpenAI-compatible servers usually serve under /v1 — try base_url {base}/v1")


def anthropic_not_found_hint(base_url: str | None) -> str:
    """For an Anthropic base_url that ends in /v1: the SDK adds /v1 itself, so try it without."""
    if base_url is None:
        return ""
    base = shown_url(base_url).rstrip("/")
    if not base.endswith("/v1"):
        return ""
    return (f"the Anthropic SDK adds /v1 to base_url itself — try base_url "
            f"{base.removesuffix('/v1')}")


def stream_broke(model_id: str, exc: Exception) -> AnswerCutOff:
    """The answer's stream failed while it was read."""
    return AnswerCutOff(
        f"The model's answer was cut off: its stream from {model_id} broke "
        f"before the model said it was finished ({brief(exc)})."
    )


def stream_unfinished() -> AnswerCutOff:
    """The answer's stream ended without the provider's terminal event."""
    return AnswerCutOff(
        "The model's answer was cut off: its stream ended before the model said it "
        "was finished."
    )


def tool_arguments(raw: str) -> dict[str, Any]:
    """`raw` (a call's arguments, stripped, not empty) parsed as a JSON object; anything that
    is not one comes back as `{"_invalid_json": raw}`. Lone surrogates become U+FFFD."""
    try:
        arguments = json.loads(raw)
        if isinstance(arguments, dict):
            return dict(_utf8(arguments))
    except (json.JSONDecodeError, RecursionError):  # nested past what Python can walk
        pass
    return {"_invalid_json": _whole(raw)}


def _utf8(value: Any) -> Any:
    """A parsed JSON value with its strings (keys too) made `_whole`."""
    if isinstance(value, str):
        return _whole(value)
    if isinstance(value, list):
        return [_utf8(item) for item in value]
    if isinstance(value, dict):
        return {_whole(str(key)): _utf8(item) for key, item in value.items()}
    return value


def _whole(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (valid UTF-8 everywhere)."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def brief(exc: Exception) -> str:
    """The SDK's error in a few words, masked before it is cut: a key the cut halved would
    no longer be recognised whole."""
    text = mask(str(exc).strip()) or type(exc).__name__
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 3] + "…"
