"""The provider-neutral vocabulary of a model call.

Owns the shapes every adapter speaks: the messages handed to a model, the tool specs it is
offered, the events its stream yields, and the named failures a stream can end in. Adapters
translate to and from their wire protocol; nothing above `models/` sees a provider's types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hearth.masking import mask

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. `arguments` is the parsed JSON object."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One message of the context handed to a model."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role == "tool": which call this answers
    tool_name: str | None = None  # for role == "tool"
    is_error: bool = False  # for role == "tool": the call failed or was refused
    images: tuple[ImagePart, ...] = ()  # for role == "user": what it shows a model with vision
    attached: tuple[Attached, ...] = ()  # files it sent, resolved before a call (images, text)


@dataclass(frozen=True)
class ImagePart:
    """An image as a model reads it: its type and its bytes in base64."""

    media_type: str
    data: str


@dataclass(frozen=True)
class Attached:
    """A file a user message sent, as the transcript names it (`meta.attachments`): read into
    the message (text, or an image part) just before a model call, off the event loop."""

    seq: int
    name: str
    content_type: str
    size: int
    sha256: str
    id: str = ""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to the model: its name, what it does, its JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """What a call used, as its provider bills it: tokens, or for audio the characters read
    aloud (`chars`) and the seconds of audio heard (`seconds`)."""

    tokens_in: int = 0
    tokens_out: int = 0
    chars: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text as it streams."""

    text: str


@dataclass(frozen=True)
class Completed:
    """The terminal event: the provider said the answer is finished.

    `finish_reason` is normalised to one of: "stop", "tool_calls", "length", "refusal",
    "content_filter", or the provider's own word when it is none of those.
    """

    finish_reason: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""


StreamEvent = TextDelta | Completed


@dataclass(frozen=True)
class ResponseFormat:
    """What a turn's answers must be, as OpenAI's `response_format` asks: any JSON object
    (`json_object`), or JSON valid against `schema` (`json_schema`, with its `name`, `strict`
    and `description` as OpenAI reads them). The message it was asked with keeps it on its
    meta in OpenAI's shape (`as_openai`, read back by `of_openai`), so a turn resumed after a
    restart keeps it too."""

    kind: Literal["json_object", "json_schema"]
    name: str = ""
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None

    def as_openai(self) -> dict[str, Any]:
        """OpenAI's own shape: what an OpenAI-compatible model is sent."""
        if self.kind == "json_object":
            return {"type": "json_object"}
        spec: dict[str, Any] = {"name": self.name}
        for key, value in (("description", self.description), ("schema", self.schema),
                           ("strict", self.strict)):
            if value is not None:
                spec[key] = value
        return {"type": "json_schema", "json_schema": spec}

    @classmethod
    def of_openai(cls, value: object) -> ResponseFormat | None:
        """The format `as_openai` gave (None: none, or anything else)."""
        if not isinstance(value, dict):
            return None
        if value.get("type") == "json_object":
            return cls("json_object")
        spec = value.get("json_schema")
        if value.get("type") != "json_schema" or not isinstance(spec, dict):
            return None
        schema, strict, said = spec.get("schema"), spec.get("strict"), spec.get("description")
        return cls("json_schema", str(spec.get("name") or ""),
                   schema if isinstance(schema, dict) else None,
                   strict if isinstance(strict, bool) else None,
                   said if isinstance(said, str) else None)

    def problem_with(self, provider: str) -> str | None:
        """Why a model of `provider` cannot hold its answers to this format (Anthropic's
        structured output keeps a JSON schema, so `json_object` has nothing to hold them to);
        None: it can (an OpenAI-compatible model is sent the format as it was asked)."""
        if provider == "anthropic" and self.schema is None:
            return ("is an Anthropic model, whose structured output keeps a json_schema with "
                    f"its schema; it cannot take response_format {self.kind} without one")
        return None


@dataclass(frozen=True)
class ModelRequest:
    messages: list[Message]
    tools: list[ToolSpec]
    max_output_tokens: int | None = None
    response_format: ResponseFormat | None = None  # the turn's answers must be this JSON


class ModelError(Exception):
    """A model call failed; `sentence` says why in words a person can act on.

    The sentence is masked as it is made: a provider's error often repeats the request, and
    some repeat the API key it was sent."""

    code = "model_error"

    def __init__(self, sentence: str) -> None:
        sentence = mask(sentence)
        super().__init__(sentence)
        self.sentence = sentence


class AnswerCutOff(ModelError):
    """The stream ended before the provider's terminal event (no finish_reason)."""

    code = "cut_off"


class ProviderUnavailable(ModelError):
    """The provider could not be reached, or refused the request, before any answer began.

    `status` is the HTTP status it answered (None: it was not reached), `retry_after` the
    seconds its Retry-After header asked for (None: it asked for none)."""

    code = "provider_unavailable"
    status: int | None = None
    retry_after: float | None = None

    def why(self) -> str:
        """The failure in a few words ("HTTP 503", "unreachable")."""
        return f"HTTP {self.status}" if self.status is not None else "unreachable"


class KeyMissing(ProviderUnavailable):
    """The model's key is named (`api_key_env`) but that variable is not set: nothing was sent."""

    code = "key_missing"


class ProviderUnreachable(ProviderUnavailable):
    """The connection to the provider failed or closed before any answer began."""

    code = "connection_lost"


class Provider(Protocol):
    """A model endpoint that streams one answer per call."""

    model_id: str  # the configured id ("local")
    model_name: str  # the provider's model name ("llama3.1")
    provider: str  # "openai" | "anthropic"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield TextDelta events, then exactly one Completed, or raise a ModelError.

        A stream that ends without its terminal event raises AnswerCutOff.
        """
        ...
