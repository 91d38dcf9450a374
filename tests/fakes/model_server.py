"""A scripted, real-HTTP fake LLM provider for the test-suite.

``ScriptedModelServer`` is a genuine HTTP server (stdlib ``ThreadingHTTPServer`` running in a
daemon thread, bound to ``127.0.0.1`` on a free port).  It speaks the real wire protocols, so the
*official* ``openai`` and ``anthropic`` SDKs — and anything else that talks HTTP — work against it
unchanged over loopback.  Nothing is monkeypatched.

Endpoints
---------
``POST /v1/chat/completions``
    OpenAI Chat Completions.  ``stream: true`` answers ``text/event-stream`` chunks exactly as the
    real API does (role chunk, content deltas, tool-call deltas, finish chunk, optional usage chunk
    when ``stream_options.include_usage`` is set, ``data: [DONE]``); otherwise a ``chat.completion``
    JSON object.
``POST /v1/messages``
    Anthropic Messages API.  ``stream: true`` answers named SSE events (``message_start``,
    ``ping``, ``content_block_start/delta/stop``, ``message_delta``, ``message_stop``); otherwise a
    ``message`` JSON object.
``GET /v1/models``
    OpenAI model list, the names in :attr:`ScriptedModelServer.listed_models` (``fake-model``).
    If the request carries an ``anthropic-version`` header (the Anthropic SDK always sends one)
    the Anthropic list shape is returned instead.  :attr:`ScriptedModelServer.listing_status`
    other than 200 answers that status with the provider's error body (a 401's "Incorrect API
    key provided"), after :attr:`ScriptedModelServer.listing_delay` seconds; each request's
    headers are kept in :attr:`ScriptedModelServer.listing_headers`.
``POST /v1/audio/transcriptions``
    OpenAI's speech to text (a multipart form): records ``(model, filename, bytes)`` in
    :attr:`ScriptedModelServer.transcriptions` and answers ``{"text": transcript}`` (``None``:
    a 500), with ``usage`` ``{"type": "duration", "seconds": …}`` when ``transcript_seconds``
    is set.
``POST /v1/audio/speech``
    OpenAI's text to speech: records ``(model, input)`` in :attr:`ScriptedModelServer.spoken`
    and answers :data:`SPOKEN` (a few bytes of MP3).
``GET /api/tags``
    Ollama's local model list, from :attr:`ScriptedModelServer.ollama_tags` (``None`` → 404).
``POST /api/show``
    Ollama's model details: ``capabilities`` from
    :attr:`ScriptedModelServer.ollama_capabilities` (``"vision"`` among them: it reads images).
anything else
    404 with a JSON error body.

Scripting
---------
Each model call (one of the two POSTs) consumes one :class:`Reply`: first from the per-model queue
for the request's ``model`` (see ``push(..., model=...)``), then from the shared queue, then what
:attr:`ScriptedModelServer.responder` (a function of the :class:`Recorded` request, when set) makes
of it, and finally falls back to :attr:`ScriptedModelServer.default`. A responder scripts many
chats at once by what each request says (a benchmark's turns, whatever order they arrive in);
``keep_requests = False`` keeps no request (a long run's memory stays flat), so ``requests``,
``calls()`` and ``wait_for_requests`` see none.  Replies are picked — and the request recorded in
:attr:`ScriptedModelServer.requests` — as soon as the request arrives, before any ``hold`` wait, so
FIFO order always matches arrival order.

Chores
------
Hearth's background chores (a chat's title, after-turn learning, a compaction or idle summary)
run beside the turns, on the background chain or, without one, on the chat chain: a title
after a chat's first exchange, learning after every turn. So they never take a reply a test
pushed for a turn, a request whose system prompt opens with a chore's words
(:data:`CHORE_PROMPTS`) is a *chore request*: it is answered from the chore script (the
queues of :meth:`ScriptedModelServer.push_chore`, per model and kind, then
:attr:`ScriptedModelServer.chore_replies` for its kind: a title, ``{"items": []}``, a summary)
and recorded in :attr:`ScriptedModelServer.chore_requests`, not in ``requests``. So
``requests``, ``calls()`` and ``wait_for_requests`` count the turns' requests only;
``calls(chores=True)`` lists the chores' and ``every_call()`` both, in arrival order.

Faults (see :class:`Reply`): ``status`` (HTTP error with the provider's error body, which
``echo_key`` makes repeat the API key the request carried, and ``error_body`` replaces with a
JSON body of the test's own: a provider's "context length exceeded"), ``cut_after``
(stream ends cleanly mid-answer with no finish reason / usage / terminator), ``stall`` (pause after
the first event, or after ``stall_after`` content chunks), ``delay`` (pause between chunks) and
``hold`` (do not answer at all until an event is set).  ``cut_after``, ``delay``, ``stall_after``
and tool-call fragmenting only concern streamed answers; a non-streamed answer honours
``status``, ``hold``, ``started`` and ``stall`` (the stall happens between the response headers
and the body).

Streamed responses use HTTP/1.1 chunked transfer encoding with a proper terminating chunk and
``Connection: close``; every response closes its connection, so :meth:`ScriptedModelServer.stop`
really makes the provider go away.

Example::

    with ScriptedModelServer() as server:
        server.push(Reply(text="hello there"), Reply(tool_calls=[Call("search", {"q": "x"})]))
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test")
        ...
        assert server.calls("/v1/chat/completions")[0].messages[-1]["content"] == "hi"
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.loopback import Loopback

__all__ = ["Call", "Recorded", "Reply", "ScriptedModelServer"]

OPENAI_CHAT_PATH = "/v1/chat/completions"
ANTHROPIC_MESSAGES_PATH = "/v1/messages"
MODEL_CALL_PATHS = (OPENAI_CHAT_PATH, ANTHROPIC_MESSAGES_PATH)
TRANSCRIPTION_PATH = "/v1/audio/transcriptions"
SPEECH_PATH = "/v1/audio/speech"
SPOKEN = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(200)  # what /audio/speech answers

HOLD_TIMEOUT = 60.0

_ANTHROPIC_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
}

CHORE_PROMPTS = {  # a chore's kind, and the words its system prompt opens with
    "title": "You name conversations",
    "learning": "You keep the long-term memory",
    "summary": "You compact a conversation",
}


def chore_defaults() -> dict[str, Reply]:
    """What each kind of chore is answered when nothing was pushed for it: a valid answer."""
    return {"title": Reply(text="A title"), "learning": Reply(text='{"items": []}'),
            "summary": Reply(text="The user and the agent talked; nothing is left open.")}


_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass
class Call:
    """One scripted tool call.

    ``arguments`` may be a dict (JSON-encoded on the wire) or a str, which is sent verbatim so a
    test can deliver invalid JSON.  ``id`` is generated as ``call_<n>`` when ``None``.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)

    def arguments_object(self) -> Any:
        """The arguments as a JSON value (str arguments are parsed if possible, else kept)."""
        if isinstance(self.arguments, str):
            try:
                return json.loads(self.arguments)
            except ValueError:
                return self.arguments
        return self.arguments


@dataclass
class Reply:
    """One scripted model answer (plus optional faults).

    * ``text`` — answer text, streamed as ``chunks`` roughly equal deltas (none when empty).
    * ``tool_calls`` — list of :class:`Call`; each call's arguments are streamed in 2 fragments.
    * ``finish_reason`` — ``"auto"``: ``"tool_calls"`` if there are tool calls else ``"stop"``.
      Explicit values are sent as given to OpenAI clients; for Anthropic they are mapped
      (``stop``→``end_turn``, ``length``→``max_tokens``, ``tool_calls``→``tool_use``, anything else
      passed through).  ``None``: a streamed OpenAI answer has no finish chunk at all, and the
      Anthropic ``stop_reason`` is null.
    * ``usage`` — ``(input/prompt tokens, output/completion tokens)``; ``None`` means
      ``(10, words in text + 1)``.
    * ``delay`` — seconds slept between streamed chunks.
    * ``hold`` — block (up to 60 s) before sending anything at all, status line included, until the
      event is set.  Stopping the server releases the hold and drops the connection unanswered.
    * ``started`` — set as soon as this reply is picked for a request (before any ``hold`` wait).
    * ``cut_after`` — FAULT: after this many content chunks (text deltas, tool-call start deltas
      and argument fragments counted together) end the stream cleanly with no finish reason,
      no usage and no terminator (``[DONE]`` / ``message_delta`` + ``message_stop``).  The stream
      ends this way even if the answer has fewer content chunks than ``cut_after``.
    * ``status`` — FAULT: answer this HTTP status with the provider's JSON error body (429 adds
      ``retry-after: <retry_after>``, "0" unless said; None: no such header).
    * ``echo_key`` — FAULT, with ``status``: the error body's message repeats the API key the
      request carried (``Authorization: Bearer …`` or ``x-api-key``), whole, as a careless
      provider or proxy does (``Incorrect API key provided: <key>``).
    * ``error_body`` — FAULT, with ``status``: this JSON body is sent as it is instead of the
      provider's usual error body (a provider's own words: ``context_length_exceeded``).
    * ``stall`` — FAULT: send the headers and the first event, then sleep this many seconds.
    * ``stall_after`` — with ``stall`` on a streamed answer: send this many content chunks first,
      then sleep (0: right after the first event). Text shown, then a pause.
    * ``stream_error`` — FAULT: a streamed answer sends its content, then this error object in
      place of its end, as providers report a failure met mid-answer (OpenAI: a chunk
      ``{"error": …}``; Anthropic: an ``error`` event ``{"type": "error", "error": …}``).
    """

    text: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    finish_reason: str | None = "auto"
    usage: tuple[int, int] | None = None
    chunks: int = 3
    delay: float = 0.0
    hold: threading.Event | None = None
    started: threading.Event | None = None
    cut_after: int | None = None
    status: int | None = None
    echo_key: bool = False
    error_body: dict[str, Any] | None = None
    stall: float | None = None
    stall_after: int = 0
    retry_after: str | None = "0"
    stream_error: dict[str, Any] | None = None

    def resolved_usage(self) -> tuple[int, int]:
        if self.usage is not None:
            return self.usage
        return (10, len(self.text.split()) + 1)

    def openai_finish_reason(self) -> str | None:
        if self.finish_reason == "auto":
            return "tool_calls" if self.tool_calls else "stop"
        return self.finish_reason

    def anthropic_stop_reason(self) -> str | None:
        reason = self.openai_finish_reason()
        if reason is None:
            return None
        return _ANTHROPIC_STOP_REASONS.get(reason, reason)

    def text_pieces(self) -> list[str]:
        """``text`` split into at most ``chunks`` non-empty, roughly equal pieces."""
        if not self.text:
            return []
        n = max(1, min(self.chunks, len(self.text)))
        size = len(self.text)
        bounds = [i * size // n for i in range(n + 1)]
        return [self.text[bounds[i] : bounds[i + 1]] for i in range(n)]


@dataclass
class Recorded:
    """A model-call request as received (header names are lower-cased)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    model: str
    stream: bool

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def system(self) -> str:
        """The system prompt: Anthropic's ``system`` field, else the first system message."""
        system = self.body.get("system")
        if isinstance(system, list):
            return "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        if isinstance(system, str):
            return system
        first = self.messages[0] if self.messages else {}
        content = first.get("content", "") if first.get("role") == "system" else ""
        return content if isinstance(content, str) else json.dumps(content)

    @property
    def chore(self) -> str | None:
        """The chore this request is (a kind of :data:`CHORE_PROMPTS`), or None: a turn's."""
        system = self.system.lstrip()
        return next((kind for kind, words in CHORE_PROMPTS.items()
                     if system.startswith(words)), None)


def _split_in_two(s: str) -> list[str]:
    """Split a string into 2 non-empty fragments (fewer if it is too short)."""
    if len(s) < 2:
        return [s] if s else []
    mid = len(s) // 2
    return [s[:mid], s[mid:]]


class _Aborted(Exception):
    """Raised inside a handler when the server is stopping mid-response."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedModelServer


class ScriptedModelServer(Loopback):
    """A real HTTP fake of the OpenAI / Anthropic / Ollama APIs driven by scripted replies.

    See the module docstring for the protocol details.  ``port=0`` (the default) picks a free
    port on the first :meth:`start`; after :meth:`stop`, :meth:`start` rebinds the same port so a
    test can simulate a provider that goes away and comes back.
    """

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._shared: deque[Reply] = deque()
        self._per_model: dict[str, deque[Reply]] = {}
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self.requests: list[Recorded] = []  # the turns' requests (every one but a chore's)
        self.chore_requests: list[Recorded] = []
        self._every: list[Recorded] = []  # both, in arrival order
        self._chores: dict[tuple[str | None, str | None], deque[Reply]] = {}  # (model, kind)
        self.default: Reply = Reply(text="ok")
        self.responder: Callable[[Recorded], Reply | None] | None = None  # before `default`
        self.keep_requests = True  # False: no request is kept, for a long run
        self.chore_replies: dict[str, Reply] = chore_defaults()
        self.ollama_tags: list[str] | None = ["llama3.1"]
        self.ollama_capabilities: list[str] = ["completion"]  # /api/show's, for every model
        # speech to text: each request's (model, file name, bytes), and the words answered
        self.transcriptions: list[tuple[str, str, bytes]] = []
        self.transcript: str | None = "Remember to water the tomatoes."  # None: a 500
        self.transcript_seconds: float | None = None  # said as OpenAI's usage (duration)
        self.spoken: list[tuple[str, str]] = []  # text to speech: each (model, input)
        # GET /v1/models: the names listed, the status answered, each request's headers
        self.listed_models: list[str] = ["fake-model"]
        self.listing_status = 200
        self.listing_delay = 0.0  # seconds before the list is answered
        self.listing_headers: list[dict[str, str]] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ScriptedModelServer:
        if not self.running:
            self._stopping.clear()
            httpd = _HTTPServer(("127.0.0.1", self._port), _Handler)
            httpd.owner = self
            self._serve(httpd)
        return self

    def stop(self) -> None:
        if self.running:
            self._stopping.set()  # releases holds / delays / stalls of in-flight responses
            self._unserve()

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # ------------------------------------------------------------------ scripting

    def push(self, *replies: Reply | str, model: str | None = None) -> None:
        """Queue replies (FIFO).  A bare str is shorthand for ``Reply(text=...)``."""
        items = [Reply(text=r) if isinstance(r, str) else r for r in replies]
        with self._lock:
            if model is None:
                self._shared.extend(items)
            else:
                self._per_model.setdefault(model, deque()).extend(items)

    def push_chore(self, *replies: Reply | str, model: str | None = None,
                   kind: str | None = None) -> None:
        """Queue replies (FIFO) for chore requests to ``model`` (any, when None) of ``kind``
        (a key of :data:`CHORE_PROMPTS`; any, when None)."""
        items = [Reply(text=r) if isinstance(r, str) else r for r in replies]
        with self._lock:
            self._chores.setdefault((model, kind), deque()).extend(items)

    def pending(self, model: str | None = None) -> int:
        """Number of replies still queued (shared queue, or the given model's queue)."""
        with self._lock:
            if model is None:
                return len(self._shared)
            return len(self._per_model.get(model, ()))

    def calls(self, path: str | None = None, *, chores: bool = False) -> list[Recorded]:
        """The turns' requests (the chores' with ``chores=True``), to ``path`` if given."""
        with self._lock:
            recorded = self.chore_requests if chores else self.requests
            return [r for r in recorded if path is None or r.path == path]

    def every_call(self) -> list[Recorded]:
        """Every model call, the chores' included, in arrival order."""
        with self._lock:
            return list(self._every)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= n, timeout=timeout)

    def reset(self) -> None:
        """Clear queues and recorded requests; restore ``default`` and ``ollama_tags``."""
        with self._lock:
            self._shared.clear()
            self._per_model.clear()
            self._chores.clear()
            self.requests.clear()
            self.chore_requests.clear()
            self._every.clear()
            self.default = Reply(text="ok")
            self.responder = None
            self.keep_requests = True
            self.chore_replies = chore_defaults()
            self.ollama_tags = ["llama3.1"]
            self.ollama_capabilities = ["completion"]
            self.listed_models = ["fake-model"]
            self.listing_status = 200
            self.listing_delay = 0.0
            self.listing_headers.clear()

    # ------------------------------------------------------------------ internals

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _take(self, recorded: Recorded) -> Reply:
        """Record a model call and pick its reply, atomically."""
        with self._arrived:
            keep = self.keep_requests
            if keep:
                self._every.append(recorded)
                self._arrived.notify_all()
            kind = recorded.chore
            if kind is not None:
                if keep:
                    self.chore_requests.append(recorded)
                return self._chore_reply(recorded.model, kind)
            if keep:
                self.requests.append(recorded)
            queue = self._per_model.get(recorded.model)
            if queue:
                return queue.popleft()
            if self._shared:
                return self._shared.popleft()
            made = self.responder(recorded) if self.responder is not None else None
            return self.default if made is None else made

    def _chore_reply(self, model: str, kind: str) -> Reply:
        """A chore's reply: the first queue that fits it, most precise first, else its kind's
        own reply."""
        for key in ((model, kind), (model, None), (None, kind), (None, None)):
            queue = self._chores.get(key)
            if queue:
                return queue.popleft()
        return self.chore_replies[kind]

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self._stopping.wait(seconds):
            raise _Aborted


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    # quiet
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    @property
    def owner(self) -> ScriptedModelServer:
        return self.server.owner

    # ------------------------------------------------------------------ dispatch

    def do_GET(self) -> None:  # noqa: N802
        self.close_connection = True
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if path == "/v1/models":
                self._list_models()
            elif path == "/api/tags":
                tags = self.owner.ollama_tags
                if tags is None:
                    self._send_json(404, {"error": "not found"})
                else:
                    self._send_json(200, {"models": [_ollama_model(name) for name in tags]})
            else:
                self._not_found()
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            pass

    def _list_models(self) -> None:
        """`GET /v1/models`, in OpenAI's shape or (asked with `anthropic-version`) Anthropic's."""
        owner = self.owner
        with owner._lock:
            owner.listing_headers.append({k.lower(): v for k, v in self.headers.items()})
            names, status = list(owner.listed_models), owner.listing_status
        owner._sleep(owner.listing_delay)
        if status != 200:
            self._send_json(status, {"error": {"message": "Incorrect API key provided.",
                                               "type": "invalid_request_error",
                                               "code": "invalid_api_key"}})
        elif "anthropic-version" in self.headers:
            self._send_json(200, {
                "data": [{"type": "model", "id": name, "display_name": name,
                          "created_at": "2024-01-01T00:00:00Z"} for name in names],
                "has_more": False, "first_id": names[0] if names else None,
                "last_id": names[-1] if names else None})
        else:
            self._send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
                for name in names]})

    def do_POST(self) -> None:  # noqa: N802
        self.close_connection = True
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:  # the client went away mid-request (a call cancelled as it was
            return  # sent): nothing was asked, so nothing is recorded or answered
        if path == TRANSCRIPTION_PATH:
            self._transcribe(raw)
            return
        if path == "/api/show":  # Ollama: what a model can do
            self._send_json(200, {"capabilities": list(self.owner.ollama_capabilities)})
            return
        if path == SPEECH_PATH:
            self._speak(raw)
            return
        if path not in MODEL_CALL_PATHS:
            self._not_found()
            return
        anthropic = path == ANTHROPIC_MESSAGES_PATH
        try:
            if not raw:
                raise ValueError("the body is empty")
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            self._send_error(400, f"Invalid JSON body: {exc}", anthropic=anthropic)
            return

        recorded = Recorded(
            path=path,
            body=body,
            headers={k.lower(): v for k, v in self.headers.items()},
            model=str(body.get("model", "")),
            stream=bool(body.get("stream")),
        )
        owner = self.owner
        reply = owner._take(recorded)
        if reply.started is not None:
            reply.started.set()
        try:
            if reply.hold is not None:
                deadline = time.monotonic() + HOLD_TIMEOUT
                while not reply.hold.wait(0.05):
                    if owner._stopping.is_set():
                        raise _Aborted
                    if time.monotonic() >= deadline:
                        break
            if reply.status is not None:
                message = f"Scripted error {reply.status}"
                if reply.echo_key:
                    message = f"Incorrect API key provided: {_key_of(recorded.headers)}"
                if reply.error_body is not None:
                    self._send_json(reply.status, reply.error_body)
                else:
                    self._send_error(reply.status, message, anthropic, reply.retry_after)
            elif anthropic:
                self._anthropic(recorded, reply)
            else:
                self._openai(recorded, reply)
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _transcribe(self, raw: bytes) -> None:
        """OpenAI's `/audio/transcriptions`: a multipart form with `model` and `file`; the
        words answered are the server's `transcript` (None: a 500)."""
        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {self.headers.get('content-type', '')}\r\n\r\n".encode() + raw)
        fields: dict[str, tuple[str, bytes]] = {}
        for part in form.iter_parts():
            name = part.get_param("name", header="content-disposition") or ""
            filename = part.get_filename() or ""
            fields[str(name)] = (filename, part.get_payload(decode=True) or b"")
        owner = self.owner
        model = fields.get("model", ("", b""))[1].decode()
        filename, data = fields.get("file", ("", b""))
        with owner._lock:
            owner.transcriptions.append((model, filename, data))
        if owner.transcript is None:
            self._send_error(500, "Scripted transcription failure", anthropic=False)
            return
        said: dict[str, Any] = {"text": owner.transcript}
        if owner.transcript_seconds is not None:
            said["usage"] = {"type": "duration", "seconds": owner.transcript_seconds}
        self._send_json(200, said)

    def _speak(self, raw: bytes) -> None:
        """OpenAI's `/audio/speech`: records (model, input) and answers a few MP3 bytes."""
        body = json.loads(raw or b"{}")
        owner = self.owner
        with owner._lock:
            owner.spoken.append((str(body.get("model", "")), str(body.get("input", ""))))
        self.send_response(200)
        self.send_header("Content-Type", "audio/mpeg")
        self.send_header("Content-Length", str(len(SPOKEN)))
        self.end_headers()
        self.wfile.write(SPOKEN)

    # ------------------------------------------------------------------ helpers

    def _send_json(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        stall: float | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if stall:
            self.wfile.flush()
            self.owner._sleep(stall)
        self.wfile.write(data)
        self.wfile.flush()

    def _not_found(self) -> None:
        self._send_json(
            404,
            {"error": {"message": f"Unknown path {self.path}", "type": "not_found", "code": None}},
        )

    def _send_error(self, status: int, message: str, anthropic: bool,
                    retry_after: str | None = "0") -> None:
        headers = ({"retry-after": retry_after}
                   if status == 429 and retry_after is not None else {})
        if anthropic:
            err_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": err_type, "message": message},
            }
            headers["request-id"] = f"req_{self.owner._next_id()}"
        else:
            err_type, code = _OPENAI_ERROR_TYPES.get(
                status, ("server_error" if status >= 500 else "invalid_request_error", None)
            )
            payload = {"error": {"message": message, "type": err_type, "param": None, "code": code}}
        self._send_json(status, payload, headers)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # ------------------------------------------------------------------ OpenAI

    def _openai(self, req: Recorded, reply: Reply) -> None:
        owner = self.owner
        completion_id = f"chatcmpl-{owner._next_id()}"
        created = int(time.time())
        prompt_tokens, completion_tokens = reply.resolved_usage()
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        call_ids = [c.id or f"call_{owner._next_id()}" for c in reply.tool_calls]

        if not req.stream:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.text or None,
                "refusal": None,
            }
            if reply.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_json()},
                    }
                    for cid, c in zip(call_ids, reply.tool_calls, strict=True)
                ]
            self._send_json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": req.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "logprobs": None,
                            "finish_reason": reply.openai_finish_reason(),
                        }
                    ],
                    "usage": usage,
                },
                stall=reply.stall,
            )
            return

        stream_options = req.body.get("stream_options") or {}
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": req.model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
            }
            if include_usage:
                data["usage"] = None
            return data

        content: list[dict[str, Any]] = [chunk({"content": piece}) for piece in reply.text_pieces()]
        for index, (cid, call) in enumerate(zip(call_ids, reply.tool_calls, strict=True)):
            content.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": cid,
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for fragment in _split_in_two(call.arguments_json()):
                content.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                )

        self._start_stream()

        def send(data: dict[str, Any]) -> None:
            self._write_chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

        send(chunk({"role": "assistant", "content": ""}))
        for n, data in enumerate(content):
            if reply.stall and n == reply.stall_after:
                owner._sleep(reply.stall)
            if reply.cut_after is not None and n >= reply.cut_after:
                break
            owner._sleep(reply.delay)
            send(data)
        if reply.stall and reply.stall_after >= len(content):
            owner._sleep(reply.stall)
        if reply.stream_error is not None:
            send({"error": reply.stream_error})
        elif reply.cut_after is None:
            finish = reply.openai_finish_reason()
            if finish is not None:
                owner._sleep(reply.delay)
                send(chunk({}, finish))
            if include_usage:
                send(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": req.model,
                        "system_fingerprint": None,
                        "choices": [],
                        "usage": usage,
                    }
                )
            self._write_chunk(b"data: [DONE]\n\n")
        self._end_stream()

    # ------------------------------------------------------------------ Anthropic

    def _anthropic(self, req: Recorded, reply: Reply) -> None:
        owner = self.owner
        message_id = f"msg_{owner._next_id()}"
        input_tokens, output_tokens = reply.resolved_usage()
        call_ids = [c.id or f"call_{owner._next_id()}" for c in reply.tool_calls]

        if not req.stream:
            blocks: list[dict[str, Any]] = []
            if reply.text:
                blocks.append({"type": "text", "text": reply.text})
            for cid, call in zip(call_ids, reply.tool_calls, strict=True):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": cid,
                        "name": call.name,
                        "input": call.arguments_object(),
                    }
                )
            self._send_json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": req.model,
                    "content": blocks,
                    "stop_reason": reply.anthropic_stop_reason(),
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                },
                stall=reply.stall,
            )
            return

        # (event payload, counts as a content chunk?)
        events: list[tuple[dict[str, Any], bool]] = []
        index = 0
        pieces = reply.text_pieces()
        if pieces:
            events.append(
                (
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                    False,
                )
            )
            for piece in pieces:
                events.append(
                    (
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                        True,
                    )
                )
            events.append(({"type": "content_block_stop", "index": index}, False))
            index += 1
        for cid, call in zip(call_ids, reply.tool_calls, strict=True):
            events.append(
                (
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": cid,
                            "name": call.name,
                            "input": {},
                        },
                    },
                    True,
                )
            )
            for fragment in _split_in_two(call.arguments_json()):
                events.append(
                    (
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": fragment},
                        },
                        True,
                    )
                )
            events.append(({"type": "content_block_stop", "index": index}, False))
            index += 1

        self._start_stream()

        def send(data: dict[str, Any]) -> None:
            self._write_chunk(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())

        send(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": req.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            }
        )
        if reply.stall and not reply.stall_after:
            owner._sleep(reply.stall)
        send({"type": "ping"})
        sent = 0
        for data, counts in events:
            if counts:
                if reply.cut_after is not None and sent >= reply.cut_after:
                    break
                if reply.stall and reply.stall_after and sent == reply.stall_after:
                    owner._sleep(reply.stall)
                owner._sleep(reply.delay)
                sent += 1
            send(data)
        if reply.stream_error is not None:
            send({"type": "error", "error": reply.stream_error})
        elif reply.cut_after is None:
            owner._sleep(reply.delay)
            send(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reply.anthropic_stop_reason(), "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                }
            )
            send({"type": "message_stop"})
        self._end_stream()


def _key_of(headers: dict[str, str]) -> str:
    """The API key a request carried: OpenAI's bearer, else Anthropic's x-api-key."""
    scheme, _, key = headers.get("authorization", "").partition(" ")
    return key if scheme.lower() == "bearer" and key else headers.get("x-api-key", "")


def _ollama_model(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2024-01-01T00:00:00Z",
        "size": 0,
        "digest": "0" * 64,
        "details": {"format": "gguf", "family": "fake", "parameter_size": "1B"},
    }
