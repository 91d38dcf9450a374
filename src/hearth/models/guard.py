"""The call guard: the one door every model call passes through.

It holds the privacy rule: inside a restricted chat's work only the model its turn named may
be called (`privacy.reach.check_model` raises `OtherModelRefused` before anything is sent). It
counts calls per model (`calls_made`), and has every call recorded: the caller names the
call's purpose (turn, learning, title, compaction, summary, probe), and when the stream ends
(normally, by an error, or because its reader stopped or was cancelled) the recorder the
engine installed (`install`, a `models.calls.CallRecorder`) writes the call's row: outcome,
tokens, cost, duration, never any text. A refused call is recorded too. No call site may
reach a provider another way, and each names its purpose; a census test holds both rules
over the source tree.

It holds the spending limits too: before a call is sent the Spending installed
(`install_spending`, a `models.spending.Spending`) reserves the most it can cost, or refuses it
(`spending.OverLimit`, nothing sent, nothing recorded); when the call ends its real cost is
counted. A call that ends with no usage report for an answer it asked for (its reader stopped,
its stream was cut, its provider sends none) is charged an estimate (`spending.unreported`:
the input as reserved, the output from the text streamed), and its row says so; one its
provider refused before answering costs nothing.

Audio calls pass here too, priced by what they are billed by: read aloud (`speak`, purpose
`speech`) per character, a voice note (`transcribe`, purpose `transcription`) per second
heard, as its provider reports it or, when it reports none, as `models.audio.seconds_of`
measures the file. Each is reserved before it is sent, recorded and counted as a stream is.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hearth.models import audio, spending
from hearth.models.calls import STOPPED, Call, CallRecorder
from hearth.models.spending import Spending, account
from hearth.models.types import (
    Completed,
    ModelError,
    ModelRequest,
    Provider,
    ProviderUnavailable,
    StreamEvent,
    Usage,
)
from hearth.privacy import reach

calls_made: Counter[str] = Counter()
_recorder: CallRecorder | None = None
_spending: Spending | None = None


def install(recorder: CallRecorder | None) -> CallRecorder | None:
    """Make `recorder` the one every call is recorded by (None: calls go unrecorded); the one
    installed before is returned."""
    global _recorder
    before, _recorder = _recorder, recorder
    return before


def install_spending(spending: Spending | None) -> Spending | None:
    """Make `spending` the tally every call is held to (None: no limits); the one installed
    before is returned."""
    global _spending
    before, _spending = _spending, spending
    return before


def recorder() -> CallRecorder | None:
    """The recorder installed now, if any."""
    return _recorder


def stream(provider: Provider, request: ModelRequest, *,
           purpose: str) -> AsyncIterator[StreamEvent]:
    """Stream one model call through the guard, recorded as a call for `purpose`."""
    call = Call.of(provider, purpose)
    try:
        reach.check_model(provider.model_id)
    except reach.OtherModelRefused as refused:
        _ended(call, refused)
        raise
    if _spending is not None:
        call.hold = _spending.reserve(provider.model_id, request)  # or OverLimit: not sent
    calls_made[provider.model_id] += 1
    return _recorded(provider.stream(request), call, request)


async def transcribe(provider: Provider, name: str, data: bytes, content_type: str) -> str:
    """A voice note's words, through the guard: its model must be one the work may reach (a
    restricted chat's turn names the transcription model for this call itself, and says so
    in the chat), and its seconds are held to the spending limits (OverLimit: not sent).
    ModelError when the provider cannot transcribe."""
    length = Usage(seconds=audio.seconds_of(data))
    call, hear = _audio(provider, "transcribe", "transcribe audio", "transcription", length)
    with _audio_call(call, length):
        heard: audio.Heard = await hear(name, data, content_type)
    if heard.seconds is None:
        call.estimate = length  # the provider did not say: the file's own length
    _audio_ended(call, Usage(seconds=heard.seconds or 0.0))
    return heard.text


async def speak(provider: Provider, text: str) -> bytes:
    """`text` read aloud by `provider`, through the guard (as `transcribe`), priced by its
    characters."""
    said = Usage(chars=len(text))
    call, say = _audio(provider, "speak", "read aloud", "speech", said)
    with _audio_call(call, said):
        spoken = bytes(await say(text))
    _audio_ended(call, said)
    return spoken


def over_limit() -> str | None:
    """The spending limit the work running now has reached, as its sentence (None: none),
    for a paid call that is no model's to ask before it is made."""
    if _spending is None:
        return None
    over = _spending.refusal(account())
    return None if over is None else over.sentence


def charge(provider: str, purpose: str, usd: float) -> None:
    """A paid call that is no model's (a web search): recorded on the per-call record as
    `provider`'s, for `purpose`, at `usd`, and counted against the spending limits for the
    work running now."""
    call = Call(model_id=provider, provider=provider, purpose=purpose)
    if _recorder is not None:
        _recorder.record(call.charged(usd))
    if _spending is not None:
        _spending.count(call.account, usd)


def _audio(provider: Provider, method: str, what: str, purpose: str,
           most: Usage) -> tuple[Call, Callable[..., Awaitable[Any]]]:
    """The call for `purpose` and the provider's audio `method`, once the guard lets the work
    reach it (a refusal recorded) and `most` is reserved against the limits (counted)."""
    call = Call.of(provider, purpose)
    try:
        reach.check_model(provider.model_id)
    except reach.OtherModelRefused as refused:
        _ended(call, refused)
        raise
    found = getattr(provider, method, None)
    if found is None:
        raise ModelError(f"{provider.model_id} is not an OpenAI-compatible model, so it "
                         f"cannot {what}.")
    if _spending is not None:
        call.hold = _spending.reserve_usage(provider.model_id, most)  # or OverLimit
    calls_made[provider.model_id] += 1
    return call, found


@contextmanager
def _audio_call(call: Call, estimate: Usage) -> Iterator[None]:
    """Time an audio call, and record it if it fails (nothing was billed: no cost) or its
    caller stops waiting (charged `estimate`: it was sent)."""
    call.began = time.monotonic()
    try:
        yield
    except BaseException as error:  # noqa: BLE001 - recorded, then raised on unchanged
        if isinstance(error, STOPPED):
            call.estimate = estimate
        _ended(call, error)
        raise


def _audio_ended(call: Call, used: Usage) -> None:
    call.done = Completed(finish_reason="stop", usage=used)
    _ended(call, None)


async def _recorded(events: AsyncIterator[StreamEvent], call: Call,
                    request: ModelRequest) -> AsyncIterator[StreamEvent]:
    call.began = time.monotonic()  # timed from the first read: the request is sent then
    ended: BaseException | None = None
    try:
        async for event in events:
            if isinstance(event, Completed):
                call.done = event
            else:
                call.streamed += len(event.text)
            yield event
    except BaseException as error:  # noqa: BLE001 - recorded, then raised on unchanged
        ended = error
        raise
    finally:
        if _unreported(call, ended):
            call.estimate = spending.unreported(request, call.streamed, call.done)
        _ended(call, ended)


def _unreported(call: Call, error: BaseException | None) -> bool:
    """Did an answer that was asked for end with no usage report: stopped, cut, or finished
    by a provider that reports none (not refused before it began: that costs nothing)?"""
    if call.done is not None:
        return call.done.usage.tokens_in == 0 and call.done.usage.tokens_out == 0
    return not isinstance(error, (ProviderUnavailable, reach.OtherModelRefused))


def _ended(call: Call, error: BaseException | None) -> None:
    if _recorder is not None:
        _recorder.ended(call, error)
    if _spending is not None:
        _spending.ended(call.hold, call.account, call.model_id, call.usage)
