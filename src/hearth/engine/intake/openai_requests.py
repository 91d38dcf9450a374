"""The engine side of the OpenAI-compatible API (`POST /v1/chat/completions`): which agent or
model a request's `model` names, admitting its message, following its turn to the end, and the
reply (text, finish reason, tokens) read from the store.

Two kinds of request, one admission:

- **Named** (`X-Hearth-Session` or `user`): the request continues the chat of that name (opened,
  or made as any chat is, by `sessions.chats.open_chat`). Only its last message is sent, through
  `Engine.send` like any surface's; Hearth keeps the history. Its turn is the chat's: the tool
  policy, trust, grants, and a call that needs the owner's yes waits on the Approvals page.
- **Stateless** (no name): the request's messages are the whole context. A Temporary chat is
  made for it and, in ONE transaction (as `engine.intake.first_message` opens a chat), seeded with
  the earlier messages and the last one admitted (`admission.admit_in`, the one admission every
  surface goes through). Its run is of the unattended kind (`STATELESS_KIND`), so the gate
  refuses, with a sentence, a call that would need the owner's approval (nobody can answer in
  time). Temporary: it reads and writes no memory, is never listed, and is forgotten
  (`engine.operations.deletion.end_chat`) when the request ends, its reply read or not; what
  stays is what a deletion keeps (the model calls' figures, no chat and no text, and one
  `chat.deleted` audit row). System (and developer) messages are read as the owner's words,
  in their place.

The turn is followed on the chat's live bus (subscribed before its run can start): its text as
it streams, a pause for keep-alives, its `done`. A message sent into a turn already running in
the chat (steering) is answered by that turn, which is then followed from the moment it took
the message. If the bus drops the subscriber, the store is read instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from hearth.config import Config
from hearth.engine.delivery.events import Bus, Subscription
from hearth.engine.intake import admission, mentions, repeats
from hearth.engine.intake.admission import AdmissionError, Admitted
from hearth.engine.intake.attachment_desk import AttachmentDesk
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn import failover
from hearth.errors import Refusal
from hearth.models import spending
from hearth.models.spending import Spending
from hearth.models.types import ResponseFormat
from hearth.privacy.principal import Principal
from hearth.sessions import chats
from hearth.sessions.chats import DEFAULT_AGENT, ChatError, Choices, NewChat
from hearth.sessions.naming import key_for
from hearth.store import runs as run_store, sessions as session_store, transcript
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.tools.base import WebSettings
from hearth.tools.web_file import NotFetched, fetch_file

log = logging.getLogger(__name__)

HEARTH_MODEL = "hearth"  # the default agent, on the chat's model
SOURCE = "openai"  # the chats' origin and the messages' source channel
STATELESS_KIND = "api"  # an unattended run: the gate refuses what would need the owner
STEP_BREAK = "\n\n"  # between the texts of a turn's steps (before and after its tool calls)
ATTEMPTS = 20  # a chat name taken in the same instant is looked for again
POLL_SECONDS = 1.0  # how often the store is read when the bus dropped the subscriber
# The HTTP status each way a turn can end without an answer is told with.
ENDING_STATUS = {
    "no_model": 503, "abandoned": 503, "interrupted": 503, "time_limit": 504,
    "no_progress": 504, "stopped": 409, "stale": 409, "internal_error": 500,
    "spending_limit": 429, "key_missing": 503,
}
GONE = ("chat_deleted", 409, "The chat was deleted before its turn ended, so there is no reply.")


class TurnFailed(Refusal):
    """The message was admitted and its turn ended without an answer: the run's ending code
    and sentence, with the HTTP status that tells it (sending the request again would send the
    message again), and for a spending limit the seconds until it resets (`retry_after`)."""

    def __init__(self, code: str, status: int, sentence: str,
                 retry_after: int | None = None) -> None:
        super().__init__(code, status, sentence)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Target:
    """What a request's `model` names: an agent (None: the default, or as a named chat is set
    up) and a model id (None: the agent's or the chat's own)."""

    name: str
    agent: str | None
    model: str | None


@dataclass(frozen=True)
class Said:
    """One message of the request, as Hearth reads it: `system`, `user` or `assistant`."""

    role: str
    text: str


@dataclass(frozen=True)
class Upload:
    """A file the request's last message holds: its bytes (a data URL, an audio or file
    part), or the http(s) URL of an image, fetched through the SSRF guard."""

    name: str
    data: bytes | None = None
    url: str | None = None


@dataclass(frozen=True)
class Asked:
    """A chat-completions request: its target, the chat it names (None: stateless), the
    messages before its last, and its last (the user's)."""

    target: Target
    chat: str | None
    history: tuple[Said, ...]
    text: str
    principal: Principal  # who asks: the owner, or an app (whose chats are its own)
    files: tuple[Upload, ...] = ()  # the last message's images and files, sent with it
    response_format: ResponseFormat | None = None  # what the turn's answers must be
    idempotency_key: str | None = None  # the client's `Idempotency-Key`, as it sent it

    @property
    def app(self) -> str | None:
        return self.principal.app

    @property
    def idem(self) -> str | None:
        """The key the message is kept under: the client's, scoped to who sent it."""
        key = self.idempotency_key
        return None if key is None else repeats.scoped(self.principal, key)

    def meta(self, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        """The message's meta with its response format (read by the turn's claim)."""
        if self.response_format is None:
            return meta
        return {**(meta or {}), "response_format": self.response_format.as_openai()}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Text:
    """Streamed text of the answer."""

    text: str


@dataclass(frozen=True)
class Tick:
    """Nothing came for a while (the turn thinks, runs a tool, or waits on the owner)."""


@dataclass(frozen=True)
class Reply:
    """The turn's answer: its text (each step's, in order), why it stopped (`stop`, or
    `length` when the model's output cap cut it), its tokens, and the run it came from."""

    run_id: str
    content: str
    finish_reason: str
    usage: Usage


Piece = Text | Tick | Reply



class RequestHost(Protocol):
    """What an OpenAI-compatible request's turn needs of the engine."""

    db: Database
    bus: Bus
    accepting: bool  # False once the gateway stops: nothing more is admitted
    prompts_dir: Path  # the saved prompts a stateless request's message may mention

    spending: Spending  # the limits' tally (when a limit a turn ended on resets)

    def choices(self) -> Choices: ...

    @property
    def config(self) -> Config: ...

    @property
    def attachments(self) -> AttachmentDesk: ...

    @property
    def snapshot(self) -> Snapshot: ...

    async def send(self, session_key: str, text: str, *, principal: Principal,
                   source_channel: str | None = ..., meta: dict[str, Any] | None = ...,
                   idempotency_key: str | None = ...,
                   files: tuple[str, ...] = ...) -> Admitted: ...

    def dispatch(self, session_key: str) -> None: ...

    async def end_temporary(self, session_key: str) -> str | None:
        """Forget a Temporary chat now, its running turn stopped first: None once it is
        wholly gone, else what keeps it."""


def model_names(engine: RequestHost) -> list[str]:
    """What a request may name as its `model`: `hearth`, each agent set up, each model id."""
    choices = engine.choices()
    agents = [name for name in choices.agents if name != DEFAULT_AGENT]
    return list(dict.fromkeys([HEARTH_MODEL, *agents, *choices.models]))


def resolve(engine: RequestHost, name: str) -> Target:
    """The agent or model `name` means (`hearth` first, then agents, then model ids); 404
    `model_not_found` for anything else."""
    choices = engine.choices()
    if name == HEARTH_MODEL:
        return Target(name, None, None)
    if name in choices.agents and name != DEFAULT_AGENT:
        return Target(name, name, None)
    if name in choices.models:
        return Target(name, None, name)
    shown = name if len(name) <= 100 else name[:100] + "…"
    raise Refusal("model_not_found", 404,
                  f"The model {shown!r} does not exist here. Name one of: "
                  f"{', '.join(model_names(engine))} (GET /v1/models lists them).",
                  details={"param": "model"})


async def begin(engine: RequestHost, asked: Asked) -> Exchange:
    """Admit the request's message (a promise, as every admission) and start its turn."""
    await _check_format(engine, asked)
    if asked.chat is None:
        return await _begin_stateless(engine, asked)
    return await _begin_named(engine, asked, asked.chat)


async def _check_format(engine: RequestHost, asked: Asked) -> None:
    """A response format the model the turn starts on cannot hold its answers to is refused
    (400 `response_format_unsupported`) before anything is admitted, never ignored."""
    wanted = asked.response_format
    if wanted is None:
        return
    target, kept = asked.target, None
    if asked.chat is not None:
        kept = await engine.db.reading(session_store.get, key_for(asked.chat, asked.app))
    agent = target.agent or (kept.agent if kept is not None else DEFAULT_AGENT)
    model = target.model or (kept.model if kept is not None else None)
    snapshot = engine.snapshot
    pinned = snapshot.config.agents.get(agent)
    order = snapshot.models.resolve(failover.axis_of(kept) if kept is not None else "chat",
                                    model, pinned.model if pinned else None, agent).order
    problem = snapshot.models.format_problem(order[0].model_id, wanted) if order else None
    if problem is not None:
        raise Refusal("response_format_unsupported", 400,
                      f"The model this turn runs on, {order[0].model_id}, {problem}. Send a "
                      f"json_schema with its schema, or name a model that takes {wanted.kind}.",
                      details={"param": "response_format"})


async def _begin_named(engine: RequestHost, asked: Asked, name: str) -> Exchange:
    admission.validate(asked.text, None, _files_of(asked))
    target = asked.target
    opened = await chats.open_chat(engine.db, name=name, agent=target.agent, model=target.model,
                                   origin=SOURCE, choices=engine.choices(),
                                   created_by_app=asked.app)
    key = opened.session.key  # the name in the asker's own namespace
    idem = asked.idem
    if idem is not None:
        repeated = await engine.db.reading(repeats.in_chat, key, idem, asked.text)
        if repeated is not None:
            return Exchange(engine, key, repeated, None, stateless=False)
    await _run_on(engine, opened.session, target)
    files = await _uploaded(engine, key, asked.files)
    sub = engine.bus.subscribe(key)  # before the run exists: none of its frames is missed
    try:
        admitted = await engine.send(key, asked.text, principal=asked.principal,
                                     source_channel=SOURCE, files=files, meta=asked.meta(None),
                                     idempotency_key=idem)
    except BaseException:
        engine.bus.unsubscribe(sub)
        raise
    if admitted.duplicate:  # a repeat admitted at the same moment: its frames began before
        engine.bus.unsubscribe(sub)
        return Exchange(engine, key, admitted, None, stateless=False)
    return Exchange(engine, key, admitted, sub, stateless=False)


async def _run_on(engine: RequestHost, session: SessionRow, target: Target) -> None:
    """A named chat runs on the agent or model the request names from this turn on (`hearth`
    changes nothing: the chat as it is set up)."""
    change: dict[str, object] = {}
    if target.agent is not None and target.agent != session.agent:
        change["agent"] = target.agent
    if target.model is not None and target.model != session.model:
        change["model"] = target.model
    if change:
        await chats.update(engine.db, session.key, runs_on=change, choices=engine.choices())


async def _begin_stateless(engine: RequestHost, asked: Asked) -> Exchange:
    if not engine.accepting:
        raise AdmissionError("shutting_down", 503,
                             "The gateway is stopping and takes no new messages; send it again "
                             "once it is back.")
    admission.validate(asked.text, None, _files_of(asked))
    if asked.idem is not None:
        repeated = await engine.db.reading(repeats.anywhere, asked.idem, asked.text)
        if repeated is not None:
            return Exchange(engine, repeated.session_key, repeated, None, stateless=True)
    new = chats.checked_new(memory_mode="temporary", agent=asked.target.agent,
                            model=asked.target.model, origin=SOURCE, choices=engine.choices(),
                            created_by_app=asked.app)
    mention = await mentions.prepare(engine.prompts_dir, asked.text,
                                     asked.meta(None))  # @name expanded
    if asked.files:  # the chat first, for its files to be kept in; then the message
        admitted = await _admit_with_files(engine, new, asked, mention.meta)
    else:
        admitted = await _seeded(engine, _seed_and_admit, new, asked, mention.meta)
    if admitted.duplicate:  # a repeat admitted at the same moment, in its own chat
        return Exchange(engine, admitted.session_key, admitted, None, stateless=True)
    # nothing runs in the new chat before it is dispatched: subscribing now misses nothing
    sub = engine.bus.subscribe(admitted.session_key)
    engine.dispatch(admitted.session_key)
    return Exchange(engine, admitted.session_key, admitted, sub, stateless=True)


async def _seeded(engine: RequestHost, write: Any, *args: Any) -> Any:
    """`write` (which makes the Temporary chat) in the writer, its name taken again when
    another chat took it in the same instant."""
    for _attempt in range(ATTEMPTS):
        try:
            return await engine.db.writing(write, *args)
        except IntegrityError:
            continue  # another chat took the name in the same instant; look again
    raise ChatError("name_conflict", 409, "Could not find a free name for the chat; try again.")


async def _admit_with_files(engine: RequestHost, new: NewChat, asked: Asked,
                            meta: dict[str, Any] | None) -> Admitted:
    """A stateless request with files: the Temporary chat made, its files kept in it, then
    its messages admitted; a failure on the way forgets the chat (nothing of it stays)."""
    session = await _seeded(engine, chats.insert_new, new)
    try:
        files = await _uploaded(engine, session.key, asked.files)
        limit = engine.config.attachments.max_message_bytes
        admitted: Admitted = await engine.db.writing(_admit_into, session, asked, meta,
                                                     admission.Files(files, limit))
        return admitted
    except BaseException:
        await engine.end_temporary(session.key)
        raise


def _files_of(asked: Asked) -> admission.Files | None:
    """For `validate`: whether the message sends files (then its text may be empty)."""
    return admission.Files(tuple(u.name for u in asked.files), 0) if asked.files else None


async def _uploaded(engine: RequestHost, key: str, files: tuple[Upload, ...]
                    ) -> tuple[str, ...]:
    """Each of the request's files kept in the chat (a URL's fetched first): their ids."""
    ids = []
    for upload in files:
        data = upload.data if upload.data is not None else await _fetched(engine, upload)
        ids.append((await engine.attachments.receive_bytes(key, upload.name, data)).id)
    return tuple(ids)


async def _fetched(engine: RequestHost, upload: Upload) -> bytes:
    tools = engine.config.tools
    web = WebSettings(tuple(tools.web_fetch_allow_hosts), tools.web_fetch_max_bytes,
                      tools.web_fetch_timeout_seconds)
    try:
        return await fetch_file(str(upload.url), web, engine.config.attachments.max_file_bytes)
    except NotFetched as why:
        raise Refusal("image_not_fetched", 400, f"The image could not be fetched: {why}.",
                      details={"param": "messages"}) from None


def _seed_and_admit(conn: Connection, new: NewChat, asked: Asked,
                    meta: dict[str, Any] | None) -> Admitted:
    """The Temporary chat, the request's earlier messages and its last one admitted (with its
    run), in one transaction; with an idempotency key already admitted, its run again (the
    lookup and the admission one step of the one writer)."""
    if asked.idem is not None:
        repeated = repeats.anywhere(conn, asked.idem, asked.text)
        if repeated is not None:
            return repeated
    return _admit_into(conn, chats.insert_new(conn, new), asked, meta)


def _admit_into(conn: Connection, session: SessionRow, asked: Asked,
                meta: dict[str, Any] | None, files: admission.Files | None = None) -> Admitted:
    """The request's earlier messages and its last one admitted (with its run) into the
    Temporary chat `session`, in the caller's transaction."""
    for said in asked.history:
        kind = "assistant" if said.role == "assistant" else "user"
        transcript.append(conn, session.key, kind, {"text": said.text}, source_channel=SOURCE)
    admitted, _event = admission.admit_in(
        conn, session.key, asked.text, asked.idem, SOURCE, STATELESS_KIND, meta,
        principal=asked.principal, files=files)
    return admitted


_closing: set[asyncio.Task[None]] = set()  # ends of exchanges whose request was cut short
_following: Counter[str] = Counter()  # chat -> the exchanges here that follow its turn


@dataclass(eq=False)
class Exchange:
    """One request's turn, from its admission to its reply. A repeat (`sub` None: the run
    was admitted by an earlier request) is followed in the store, its text told whole at
    its end; a stateless request's chat is forgotten when the last exchange here that
    follows it closes."""

    engine: RequestHost
    key: str
    admitted: Admitted
    sub: Subscription | None
    stateless: bool
    emitted: str = ""  # the text handed out as pieces so far
    _closing_task: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        _following[self.key] += 1

    @property
    def run_id(self) -> str:
        return self.admitted.run_id

    async def reply(self) -> Reply:
        """Wait for the turn's end; its reply, or `TurnFailed`."""
        async with contextlib.aclosing(self.pieces(keepalive=3600.0)) as pieces:
            async for piece in pieces:
                if isinstance(piece, Reply):
                    return piece
        raise AssertionError("pieces() ends with a Reply or raises")  # pragma: no cover

    async def pieces(self, keepalive: float) -> AsyncGenerator[Piece, None]:
        """The answer's text as it streams, a `Tick` after each `keepalive` seconds without
        any, then the `Reply` (or `TurnFailed`)."""
        follower = _Follower(self.run_id, self.admitted.into)
        async for frame in self._frames(self.sub, keepalive):
            if frame is None:
                yield Tick()
                continue
            text = follower.take(frame)
            if text:
                self.emitted += text
                yield Text(text)
            if follower.ended:
                break
        if not follower.ended:  # the bus let go before the end: the store says how it ends
            async for _tick in self._polled(follower, keepalive):
                yield Tick()
        reply = await self._reply(follower.run_id)
        rest = reply.content[len(self.emitted):] if reply.content.startswith(self.emitted) else ""
        if rest:  # what streamed while the bus was not read
            self.emitted += rest
            yield Text(rest)
        yield reply

    @staticmethod
    async def _frames(sub: Subscription | None, keepalive: float
                      ) -> AsyncIterator[dict[str, Any] | None]:
        """The chat's live frames; None after `keepalive` seconds without one. Ends when the
        bus drops the subscriber (it fell behind) or closes (the gateway stops); at once for
        a repeat, which is not subscribed."""
        while sub is not None:
            try:
                frame = await asyncio.wait_for(sub.queue.get(), keepalive)
            except TimeoutError:
                yield None
                continue
            if frame is None:
                return
            yield frame

    async def _polled(self, follower: _Follower, keepalive: float) -> AsyncIterator[None]:
        """Read the store until the run that answers has ended, yielding after each
        `keepalive` seconds of it. A gateway stopping ends the request."""
        last_tick = time.monotonic()
        while True:
            if not self.engine.accepting:
                raise TurnFailed("shutting_down", 503,
                                 "The gateway is stopping, so this request's turn was ended."
                                 if self.stateless else
                                 "The gateway is stopping; the turn will be resumed in the chat "
                                 "when it starts again.")
            run = await self.engine.db.reading(run_store.get, follower.run_id)
            if run is None:
                raise TurnFailed(*GONE)
            if run.ended and not follower.steered_on(run):
                return
            if not run.ended:
                await self.engine.bus.wait_run(run.run_id, POLL_SECONDS)
            if time.monotonic() - last_tick >= keepalive:
                last_tick = time.monotonic()
                yield None

    async def _reply(self, run_id: str) -> Reply:
        found = await self.engine.db.reading(_outcome_in, self.key, self.run_id, run_id)
        if found is None:
            raise TurnFailed(*GONE)
        run, answers = found
        if run.status != "complete":
            code = run.ending or "internal_error"
            sentence = run.sentence or "The turn ended without an answer."
            wait = _resets_in(self.engine.spending, sentence) if code == "spending_limit" \
                else None
            raise TurnFailed(code, ENDING_STATUS.get(code, 502), sentence, wait)
        return _reply_of(run, answers)

    async def close(self) -> None:
        """Stop following the chat; a stateless request's chat is forgotten now (its turn
        stopped first if it still runs). The closing runs on its own: a request cancelled
        while it waits does not cut it short."""
        await asyncio.shield(self._closing())

    def close_soon(self) -> None:
        """`close` without waiting for it: for a request cut short (the client left)."""
        self._closing()

    def _closing(self) -> asyncio.Task[None]:
        if self._closing_task is None:
            task = asyncio.get_running_loop().create_task(self._close(), name="openai:close")
            _closing.add(task)
            task.add_done_callback(_closing.discard)
            self._closing_task = task
        return self._closing_task

    async def _close(self) -> None:
        if self.sub is not None:
            self.engine.bus.unsubscribe(self.sub)
        _following[self.key] -= 1
        if _following[self.key] > 0:
            return  # another request here follows the same turn: the last one forgets it
        del _following[self.key]
        if not self.stateless:
            return
        try:
            kept = await self.engine.end_temporary(self.key)
        except SQLAlchemyError as error:  # the sweeper, the next stop or start forgets it
            log.warning("a stateless request's chat could not be forgotten yet (%s)",
                        type(error).__name__)
            return
        if kept is not None:
            log.warning("a stateless request's chat was not wholly forgotten: %s", kept)


class _Follower:
    """Which run answers the request, and what of the live frames is its text: the request's
    own run, or, once that run ends `steered`, the turn it was sent into (its text from then
    on). A step's text is set apart from the step before it by `STEP_BREAK`."""

    def __init__(self, own: str, into: str | None) -> None:
        self.own = own
        self.into = into
        self.run_id = own
        self.ended = False
        self._new_step = False
        self._shown = False

    def take(self, frame: dict[str, Any]) -> str:
        """The text this frame adds to the answer ('' for none); notes the end."""
        if frame.get("run_id") != self.run_id:
            return ""
        kind = frame.get("type")
        if kind == "delta":
            text = str(frame.get("text", ""))
            if self._new_step and self._shown:
                text = STEP_BREAK + text
            self._new_step, self._shown = False, self._shown or bool(text)
            return text
        if kind == "message" and frame["message"].get("kind") != "user":
            self._new_step = True  # what streams next is another step's
        elif kind == "done":
            if frame.get("ending") == "steered" and self._switch():
                return ""
            self.ended = True
        return ""

    def steered_on(self, run: RunRow) -> bool:
        """For the store's reading: the own run ended `steered`, so follow the other."""
        return run.ending == "steered" and self._switch()

    def _switch(self) -> bool:
        if self.run_id != self.own or self.into is None:
            return False
        self.run_id = self.into
        self._new_step = True
        return True


def _resets_in(tally: Spending, sentence: str) -> int:
    """The seconds until the spending limit a turn's ending names resets (its sentence begins
    with the limit's label); the next UTC midnight when no limit set now is the one named."""
    now = time.time()
    said = sentence[:1].lower() + sentence[1:]
    named = (spent.resets_at for spent in tally.standing(now) if said.startswith(spent.cap.label()))
    return max(1, math.ceil(next(named, spending.resets_at("day", now)) - now))


def _outcome_in(conn: Connection, key: str, own: str,
                answering: str) -> tuple[RunRow, list[transcript.EventRow]] | None:
    """The run that answers and its assistant messages from the request's message on (None
    when the chat is gone)."""
    own_run = run_store.get(conn, own)
    run = run_store.get(conn, answering)
    if own_run is None or run is None:
        return None
    events = transcript.of_run(conn, key, answering, own_run.user_event_seq or 0)
    return run, [event for event in events if event.kind == "assistant"]


def _reply_of(run: RunRow, answers: list[transcript.EventRow]) -> Reply:
    texts = [str(event.content.get("text", "")) for event in answers]
    final = next((e for e in reversed(answers) if "turn_telemetry" in e.meta), None)
    telemetry = final.meta.get("turn_telemetry") if final is not None else None
    telemetry = telemetry if isinstance(telemetry, dict) else {}
    capped = final is not None and bool(final.meta.get("capped"))
    return Reply(run_id=run.run_id, content=STEP_BREAK.join(t for t in texts if t),
                 finish_reason="length" if capped else "stop",
                 usage=Usage(_count(telemetry.get("tokens_in")),
                             _count(telemetry.get("tokens_out"))))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
