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
counted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from hearth.models.calls import Call, CallRecorder
from hearth.models.spending import Spending, account
from hearth.models.types import Completed, ModelError, ModelRequest, Provider, StreamEvent
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
    return _recorded(provider.stream(request), call)


async def transcribe(provider: Provider, name: str, data: bytes, content_type: str) -> str:
    """A voice note's words, through the guard: its model must be one the work may reach (a
    restricted chat's turn names the transcription model for this call itself, and says so
    in the chat). ModelError when the provider cannot transcribe."""
    hear = _audio(provider, "transcribe", "transcribe audio")
    return str(await hear(name, data, content_type))


async def speak(provider: Provider, text: str) -> bytes:
    """`text` read aloud by `provider`, through the guard (as `transcribe`)."""
    say = _audio(provider, "speak", "read aloud")
    return bytes(await say(text))


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


def _audio(provider: Provider, method: str, what: str) -> Any:
    """The provider's audio `method`, once the guard lets the work reach it (counted)."""
    reach.check_model(provider.model_id)
    calls_made[provider.model_id] += 1
    found = getattr(provider, method, None)
    if found is None:
        raise ModelError(f"{provider.model_id} is not an OpenAI-compatible model, so it "
                         f"cannot {what}.")
    return found


async def _recorded(events: AsyncIterator[StreamEvent],
                    call: Call) -> AsyncIterator[StreamEvent]:
    call.began = time.monotonic()  # timed from the first read: the request is sent then
    ended: BaseException | None = None
    try:
        async for event in events:
            if isinstance(event, Completed):
                call.done = event
            yield event
    except BaseException as error:  # noqa: BLE001 - recorded, then raised on unchanged
        ended = error
        raise
    finally:
        _ended(call, ended)


def _ended(call: Call, error: BaseException | None) -> None:
    if _recorder is not None:
        _recorder.ended(call, error)
    if _spending is not None:
        _spending.ended(call.hold, call.account, call.model_id,
                        call.done.usage if call.done is not None else None)
