"""What a `POST /v1/chat/completions` request says, read as OpenAI defines it.

Owns the pydantic models of its body (`ChatRequest`: its messages, their content parts, each
part's own object, `stream_options`, `response_format`) and their reading into what the engine
takes (`read`: the chat it names, the earlier messages, the last one's text and files, the
format its answers must be). A body of the wrong shape (an `image_url` given as a string, a
part without `type`, a number where text goes) is refused by the models: FastAPI answers 400 in
OpenAI's shape, the field in `param`. What is well-formed yet not something Hearth does is
refused here, each with its sentence: `n` above 1, a client's own `tools`, a part whose type
has no object of its own, files anywhere but in the last message, more files than one message
may send (`admission.MAX_FILES`, the API's), a `json_schema` format without its schema object.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)

from hearth.engine.intake.admission import MAX_FILES
from hearth.engine.intake.openai_requests import Said, Upload
from hearth.errors import Refusal
from hearth.models.types import ResponseFormat
from hearth.sessions.naming import NAME_PATTERN, name_part

NAME_SENTENCE = ("names a Hearth chat: 1 to 128 letters, digits, '.', '_', ':' or '-', starting "
                 "with a letter or digit")
FILE_PARTS = ("image_url", "input_audio", "file")
KEY = re.compile(r"[\x21-\x7e]{1,255}")  # an Idempotency-Key (RFC 9110's visible characters)


class ImageURL(BaseModel):
    model_config = ConfigDict(extra="allow")
    url: StrictStr
    detail: StrictStr | None = None


class InputAudio(BaseModel):
    model_config = ConfigDict(extra="allow")
    data: StrictStr
    format: StrictStr = Field("wav", pattern=r"^[A-Za-z0-9]{1,10}$")


class FileData(BaseModel):
    model_config = ConfigDict(extra="allow")
    file_data: StrictStr | None = None
    filename: StrictStr | None = Field(None, min_length=1, max_length=255)
    file_id: StrictStr | None = None


class ContentPart(BaseModel):
    """One part of a message: its `type`, and the object that type names (`text`,
    `image_url`, `input_audio` or `file`), each of its own shape."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None
    image_url: ImageURL | None = None
    input_audio: InputAudio | None = None
    file: FileData | None = None


def _as_parts(content: object) -> object:
    """A message's content as its parts: a string is one text part."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Annotated[list[ContentPart] | None, BeforeValidator(_as_parts)] = None
    tool_calls: list[Any] | None = None
    function_call: Any = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool | None = None


class JsonSchema(BaseModel):
    """`response_format.json_schema`: the schema's name, and the schema itself."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: StrictStr = Field(min_length=1, max_length=64)
    description: StrictStr | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: StrictBool | None = None


class ResponseFormatBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchema | None = None


class ChatRequest(BaseModel):
    """What is read of a request; any other field OpenAI defines is accepted and not read."""

    model_config = ConfigDict(extra="allow")
    model: StrictStr = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None
    user: StrictStr | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    response_format: ResponseFormatBody | None = None


def invalid(param: str | None, sentence: str, code: str = "invalid_request") -> Refusal:
    return Refusal(code, 400, sentence, details={"param": param})


def read(body: ChatRequest, header: str | None, app: str | None
         ) -> tuple[str | None, tuple[Said, ...], str, tuple[Upload, ...]]:
    """The chat named, the earlier messages (a stateless request's context), the last one's
    text and its files."""
    if body.n is not None and body.n != 1:
        raise invalid("n", "Hearth writes one answer per request; n must be 1.")
    for name in ("tools", "functions"):
        if getattr(body, name):
            raise invalid(name, f"Hearth's agent runs Hearth's own tools; a request's {name} "
                                "are not supported. Send the request without them.")
    chat = _chat_named(header, body.user, app)
    last = body.messages[-1]
    if last.role != "user":
        raise invalid("messages", "The last message must be the user's (role 'user'): it is "
                                  "the message Hearth sends.")
    text, files = _parts_of(len(body.messages) - 1, last)
    if not text.strip() and not files:
        raise invalid("messages", "The last message is empty; write something to send.",
                      "empty_message")
    history: tuple[Said, ...] = ()
    if chat is None:  # stateless: the earlier messages are the context
        history = tuple(_context(index, message)
                        for index, message in enumerate(body.messages[:-1]))
    return chat, tuple(said for said in history if said.text), text, files


def format_of(body: ChatRequest) -> ResponseFormat | None:
    """The format the answers must be (None: `text`, the default, or none asked)."""
    asked = body.response_format
    if asked is None or asked.type == "text":
        return None
    if asked.type == "json_object":
        return ResponseFormat("json_object")
    spec = asked.json_schema
    if spec is None:
        raise invalid("response_format.json_schema",
                      'A json_schema response_format names its schema: "json_schema": '
                      '{"name": …, "schema": {…}}.')
    return ResponseFormat("json_schema", spec.name, spec.schema_, spec.strict, spec.description)


def key_of(header: str | None) -> str | None:
    """The request's `Idempotency-Key` (as a structured-field string, `"…"`, too): 1 to 255
    visible characters, else 400."""
    if header is None:
        return None
    key = header.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not KEY.fullmatch(key):
        raise invalid("Idempotency-Key", "The Idempotency-Key header must be 1 to 255 visible "
                      "ASCII characters (a UUID, say), one per request and the same on its "
                      "retries.", "invalid_idempotency_key")
    return key


def _chat_named(header: str | None, user: str | None, app: str | None) -> str | None:
    """The chat the request names: the header, else `user` (both: the same one); an app's
    names are its own (`naming.key_for`), so it may also give back the key it was handed."""
    if header is not None and user is not None and header != user:
        raise invalid("user", "X-Hearth-Session and user name two different chats; send one.")
    for name, param in ((header, None), (user, "user")):
        if name is None:
            continue
        if not NAME_PATTERN.match(name_part(name, app)):
            where = "user" if param else "X-Hearth-Session"
            raise invalid(param, f"{where} {NAME_SENTENCE}; {name[:100]!r} is not one.",
                          "invalid_name")
        return name
    return None


def _context(index: int, message: ChatMessage) -> Said:
    """A stateless request's earlier message; a client's tool calls and results are refused
    (Hearth's agent runs its own tools)."""
    if message.role in ("tool", "function") or message.tool_calls or message.function_call:
        raise invalid(f"messages.{index}",
                      "Tool calls and tool results of a client's own tools are not supported: "
                      "Hearth's agent runs Hearth's tools. Send the conversation's text only.")
    role = "system" if message.role in ("system", "developer") else message.role
    return Said(role, _text_of(index, message.content or []))


def _parts_of(index: int, message: ChatMessage) -> tuple[str, tuple[Upload, ...]]:
    """The last message's text and its files: `image_url` parts (a data URL, or an http(s)
    URL the gateway fetches through its SSRF guard), `input_audio` and `file` parts (their
    bytes in base64), at most `MAX_FILES`. Each is kept in the chat as an attachment (see the
    docs' HTTP API page, docs/http-api.md)."""
    parts = message.content or []
    sent = sum(part.type != "text" for part in parts)
    if sent > MAX_FILES:
        raise invalid(f"messages.{index}.content",
                      f"A message may send at most {MAX_FILES} files (image_url, input_audio "
                      f"and file parts); this one has {sent}. Send the rest in another.",
                      "too_many_files")
    files: list[Upload] = []
    for number, part in enumerate(parts):
        if part.type != "text":
            files.append(_upload(f"messages.{index}.content.{number}", part, len(files) + 1))
    return _text_of(index, parts, files_read=True), tuple(files)


def _upload(param: str, part: ContentPart, number: int) -> Upload:
    """One file part of the last message, read (or its URL taken) as OpenAI defines it."""
    if part.type not in FILE_PARTS:
        raise invalid(param, f"Hearth reads text, image_url, input_audio and file parts; a "
                             f"{part.type[:40]!r} part is not supported.")
    if part.type == "image_url" and part.image_url is not None:
        url = part.image_url.url
        if url.startswith(("http://", "https://")):
            return Upload(f"image-{number}", url=url)
        return Upload(f"image-{number}", data=_data_url(param, url))
    if part.type == "input_audio" and part.input_audio is not None:
        audio = part.input_audio
        return Upload(f"audio-{number}.{audio.format}", data=_base64(param, audio.data))
    if part.type == "file" and part.file is not None:
        return _file(param, part.file, number)
    raise invalid(f"{param}.{part.type}",
                  f"A {part.type} part holds its {part.type} object; this one has none.")


def _file(param: str, file: FileData, number: int) -> Upload:
    """A `file` part: its bytes in `file_data` (base64, or a base64 data URL)."""
    if file.file_data is None:
        raise invalid(f"{param}.file.file_data",
                      "A file part sends its bytes in file_data (base64); Hearth keeps no "
                      "uploaded files to name by file_id.")
    data = file.file_data
    name = file.filename or f"file-{number}"
    return Upload(name, data=_data_url(param, data) if data.startswith("data:")
                  else _base64(param, data))


def _data_url(param: str, url: str) -> bytes:
    head, comma, data = url.partition(",")
    if not (url.startswith("data:") and comma and head.endswith(";base64")):
        raise invalid(param, "An image must be an http(s) URL or a base64 data URL "
                             "(data:image/png;base64,…).")
    return _base64(param, data)


def _base64(param: str, data: str) -> bytes:
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(param, "The file's data is not valid base64.") from None
    if not decoded:
        raise invalid(param, "The file's data is empty.")
    return decoded


def _text_of(index: int, parts: list[ContentPart], files_read: bool = False) -> str:
    """A message's text: its text parts joined. Any other part is refused unless the message
    is the last (`files_read`: its files are read apart)."""
    for number, part in enumerate(parts):
        if part.type != "text" and not files_read:
            raise invalid(f"messages.{index}.content",
                          f"Hearth reads a {part.type[:40]!r} part in the last message only; "
                          "an earlier message may hold text alone.")
        if part.type == "text" and part.text is None:
            raise invalid(f"messages.{index}.content.{number}.text",
                          "A text part holds its text (a string); this one has none.")
    text = "\n".join(part.text or "" for part in parts if part.type == "text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"messages.{index}.content",
                      "The message holds characters that are not valid Unicode text (a lone "
                      "surrogate).") from None
    return text
