"""Compaction: folding the older part of a chat's model view into a summary.

The model's view of a chat (never its transcript) is compacted when it would use more than
`limits.autocompact_pct` of the model's window, when a provider rejects a prompt as too long
(the turn then retries once, compacted: `after_rejection`), and on request (`/compact`,
`on_request`). `engine.turn.context` decides what is read word for word (the chat's opening, the
latest whole exchanges, the running turn's request and any message sent into it); this module
folds the rest:

- the summary is a chore of its own (`models.chore_runner`): for a persistent chat it walks
  the background chain (the chat chain when that is empty), each model once through the guard,
  until one's answer passes `read_summary` (a few words at least, not cut at the output cap, a
  summary's length, none of the headings Hearth puts around it); a restricted chat's is asked
  of the turn's own model only, never another (invariant 8: the guard refuses any other);
- it carries the earlier summary forward, and lists what the owner asked in their own words
  (Hearth keeps that list itself, so a summary model that drops it cannot lose it);
- a persistent chat keeps it as a derived record (`store.summaries`); a restricted chat keeps
  nothing: the summary is held in memory for the turn only;
- the chat says so where it happened, in a notice: "Conversation compacted: freed N% of the
  window (…)", live and on reload.

When no model could write the summary, a turn's compaction still compacts: the owner's
requests are kept in their words, and the notice says the summary could not be written. An
idle summary (`owes`) folds nothing then: the chat is left as it was and the chore is owed.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hearth.config import ModelConfig
from hearth.engine.views import sent_files, sent_text
from hearth.models.chore_runner import Allowance, BreakerGate, Done, Owed, WrongAnswer, run_chore
from hearth.models.types import (
    Message,
    ModelError,
    ModelRequest,
    Provider,
    ProviderUnavailable,
)
from hearth.store import summaries
from hearth.store.db import Database
from hearth.store.transcript import EventRow

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3  # a cautious estimate: the budget only needs to stay under the window
MESSAGE_OVERHEAD = 32  # the wire's role and framing around each message, in characters
CALL_OVERHEAD = 96  # a tool call's id, type and function framing on the wire
ASK_CHARS = 240  # one request, as listed in the summary (longer ones are cut, marked …)
SUMMARY_MIN_WORDS = 3  # an answer shorter than this ("OK.") is no summary
EVENT_CHARS = 600  # one event, as the summary model reads it
SUMMARY_HEADING = "Summary of the earlier part of this conversation (compacted by Hearth):"
ASKS_HEADING = "What the user asked earlier, in their own words (oldest first):"
INSTRUCTIONS = (
    "You compact a conversation between a user and an AI agent so the agent can go on with "
    "it. Write a brief factual summary: the user's goals, decisions made, facts learned, "
    "files, names and numbers that matter, tool calls made and what they found, and what is "
    "still open. Start from the earlier summary when one is given and carry forward what "
    "still matters. Write plain prose or bullets, at most {words} words, and nothing else."
)
_TOO_LONG = re.compile(
    r"context[ _]length|context[ _]window|maximum context|prompt is too long|too many tokens|"
    r"input is too long|request_too_large|too large|reduce the length|tokens? limit",
    re.IGNORECASE)
DEFAULT_WINDOW = 128_000  # tokens, for a model with no settings of its own
DEFAULT_OUTPUT = 8192


@dataclass(frozen=True)
class Budget:
    """The sizes a view is measured against, in tokens (characters / CHARS_PER_TOKEN)."""

    context_window: int
    max_output_tokens: int
    autocompact_pct: int
    fixed_chars: int = 0  # the system prompt and the tool specs, sent with every request

    @classmethod
    def of(cls, model: ModelConfig | None, autocompact_pct: int, fixed_chars: int) -> Budget:
        """A chat model's budget (a model with no settings is measured as a common one)."""
        return cls(context_window=model.context_window if model else DEFAULT_WINDOW,
                   max_output_tokens=model.max_output_tokens if model else DEFAULT_OUTPUT,
                   autocompact_pct=autocompact_pct, fixed_chars=fixed_chars)

    @property
    def input_tokens(self) -> int:
        """What a prompt may use: the window less the answer's room (at most half of it)."""
        room = min(self.max_output_tokens, self.context_window // 2)
        return self.context_window - room

    @property
    def threshold_chars(self) -> int:
        """Past this, the view is compacted."""
        tokens = min(self.context_window * self.autocompact_pct // 100, self.input_tokens)
        return tokens * CHARS_PER_TOKEN

    @property
    def summary_chars(self) -> int:
        """The most a summary (its prose and the requests) may take."""
        return max(600, self.threshold_chars // 5)

    @property
    def keep_chars(self) -> int:
        """What the opening and the latest exchanges may take once compacted: about half
        the threshold, less what is sent anyway, so the chat grows a while before the next."""
        return self.threshold_chars // 2 - self.fixed_chars - self.summary_chars

    def pct(self, chars: int) -> float:
        """`chars` of prompt as a share of the window, in percent."""
        return 100.0 * chars / CHARS_PER_TOKEN / self.context_window


@dataclass(frozen=True)
class Folded:
    """A summary standing in for the chat's events (head_through, through_seq]."""

    head_through: int
    through_seq: int
    text: str
    asks: tuple[str, ...]

    def message(self) -> Message:
        parts = [SUMMARY_HEADING, self.text or "(no summary could be written)"]
        if self.asks:
            parts += ["", ASKS_HEADING, *(f"- {ask}" for ask in self.asks)]
        return Message("system", "\n".join(parts))

    @classmethod
    def of(cls, row: summaries.SummaryRow) -> Folded:
        return cls(row.head_through, row.through_seq, row.summary, row.asks)


@dataclass(frozen=True)
class Outcome:
    """What one compaction did, as its notice and the API say it."""

    folded: Folded
    before_chars: int
    after_chars: int
    events: int  # how many events it folded
    why: str
    failure: str | None  # why the summary could not be written, if it could not
    sentence: str = ""


Announce = Callable[[str, dict[str, Any]], Awaitable[None]]


ConfigOf = Callable[[str], ModelConfig | None]  # a model's settings, by its id


@dataclass
class Compactor:
    """One chat's compaction, for one turn (or one /compact, or one idle summary)."""

    db: Database
    session_key: str
    keeps: bool  # a persistent chat keeps its summary; a restricted one holds it for the turn
    chain: Sequence[Provider]  # the summary's models, in order (a restricted chat's: its own)
    config_of: ConfigOf
    budget: Budget
    announce: Announce  # writes the notice where the chat shows it
    held: Folded | None = None  # a restricted chat's summary, this turn only
    done: list[Outcome] = field(default_factory=list)
    rebuild: Callable[[str], Awaitable[list[Message]]] | None = None  # the view, compacted: why
    kind: str = "compaction"  # the record's kind: "idle" for the idle chore's
    breakers: BreakerGate | None = None  # told of each call (none for a restricted chat's)
    owes: bool = False  # a summary no model could write folds nothing (the idle chore's)
    owed: Owed | None = None  # why the last summary could not be written, when it could not
    allowance: Allowance | None = None  # the background budget (the idle chore's)

    async def fold(self, *, previous: Folded | None, head_through: int,
                   events: list[EventRow], before_chars: int, why: str) -> Folded | None:
        """Summarize `events` (with `previous` carried forward), keep or hold the result; None
        when no model could and the compactor `owes` it (nothing is folded)."""
        asks = _asks(previous, events, self.budget.summary_chars // 2)
        words = max(60, (self.budget.summary_chars - sum(map(len, asks))) // 6)
        said = await self._summarize(previous, events, words)
        if isinstance(said, Owed) and self.owes:
            return None
        text = said.value if isinstance(said, Done) else ""
        text = text[: max(200, self.budget.summary_chars - sum(map(len, asks)))]
        folded = Folded(head_through, events[-1].seq, text, tuple(asks))
        if self.keeps:
            await self.db.writing(
                summaries.add, self.session_key, kind=self.kind, head_through=head_through,
                through_seq=folded.through_seq, summary=text, asks=list(asks),
                model_id=said.model_id if isinstance(said, Done) else None, durable=False)
        else:
            self.held = folded
        failure = said.sentence() if isinstance(said, Owed) else None
        self.done.append(Outcome(folded, before_chars, 0, len(events), why, failure))
        return folded

    async def settled(self, after_chars: int) -> Outcome | None:
        """Say the last compaction in the chat, now its view's new size is known."""
        if not self.done or self.done[-1].sentence:
            return None
        last = self.done[-1]
        freed = max(1, round(self.budget.pct(last.before_chars - after_chars)))
        tail = "; the summary could not be written, so your requests were kept in your words" \
            if last.failure else ""
        sentence = (f"Conversation compacted: freed {freed}% of the window ({last.why}; "
                    f"{last.events} earlier messages folded into a summary{tail}).")
        outcome = Outcome(last.folded, last.before_chars, after_chars, last.events, last.why,
                          last.failure, sentence)
        self.done[-1] = outcome
        await self.announce(sentence, {"compaction": {
            "freed_pct": freed, "why": last.why, "events": last.events,
            "before_pct": round(self.budget.pct(last.before_chars), 1),
            "after_pct": round(self.budget.pct(after_chars), 1),
            "summary_failed": last.failure is not None}})
        return outcome

    async def _summarize(self, previous: Folded | None, events: list[EventRow],
                         words: int) -> Done[str] | Owed:
        """The summary, asked of each model of the chain in turn, or why none could write it."""
        def request(provider: Provider) -> ModelRequest:
            material = _material(previous, events, self._input_chars(provider))
            return ModelRequest(messages=[Message("system", INSTRUCTIONS.format(words=words)),
                                          Message("user", material)], tools=[],
                                max_output_tokens=max(256, words * 2))

        outcome = await run_chore("summary" if self.kind == "idle" else "compaction",
                                  self.chain, request, lambda said: read_summary(said, words),
                                  breakers=self.breakers, allowance=self.allowance)
        self.owed = outcome if isinstance(outcome, Owed) else None
        return outcome

    def _input_chars(self, provider: Provider) -> int:
        """What the summary model may be sent: its own window, less room for its answer."""
        config = self.config_of(provider.model_id)
        window = config.context_window if config else 128_000
        return max(2000, (window * 3 // 4 - 600) * CHARS_PER_TOKEN)


def read_summary(said: str, words: int) -> str:
    """The summary an answer gives, or WrongAnswer saying how it is not one: a few words at
    least, at most about twice the `words` asked, and none of the headings Hearth puts around
    a summary in the model's view (an answer that copies them wrote no summary of its own)."""
    text = said.strip()
    count = len(text.split())
    if count < SUMMARY_MIN_WORDS:
        raise WrongAnswer(f"the summary is {count} word(s), too short to be one")
    if count > 2 * words + 20:
        raise WrongAnswer(f"the summary is {count} words, far more than the {words} asked")
    if SUMMARY_HEADING in text or ASKS_HEADING in text:
        raise WrongAnswer("the summary repeats the headings Hearth puts around one")
    return text


def _material(previous: Folded | None, events: list[EventRow], limit: int) -> str:
    """What the summary model reads: the earlier summary, then the folded events as text
    (each cut at EVENT_CHARS; the oldest left out first when they would not fit)."""
    lines = [_line(e) for e in events]
    lines = [line for line in lines if line]
    earlier = f"Earlier summary:\n{previous.text}\n\n" if previous and previous.text else ""
    room = limit - len(earlier) - 40
    kept: list[str] = []
    for line in reversed(lines):
        if room - len(line) < 0:
            break
        kept.append(line)
        room -= len(line) + 1
    gap = "(earlier messages left out)\n" if len(kept) < len(lines) else ""
    return f"{earlier}Conversation to summarize:\n{gap}" + "\n".join(reversed(kept))


def _line(event: EventRow) -> str:
    content = event.content
    if event.kind == "user":
        said = f"User: {sent_text(event)}{_files_named(event)}"
    elif event.kind == "assistant":
        said = f"Assistant: {content.get('text', '')}"
    elif event.kind == "tool_call":
        said = f"Tool call {content.get('name', '')}: {content.get('arguments', {})}"
    elif event.kind == "tool_result":
        said = f"Tool result ({content.get('name', '')}): {content.get('output', '')}"
    else:
        return ""
    return said if len(said) <= EVENT_CHARS else said[: EVENT_CHARS - 1] + "…"


def _files_named(event: EventRow) -> str:
    """" [sent: a.png, notes.txt]" for a message that sent files (a summary keeps the
    names of the files it folded, since the model no longer reads the message itself)."""
    names = [str(f.get("name", "file")) for f in sent_files(event.meta)]
    return f" [sent: {', '.join(names)}]" if names else ""


def _asks(previous: Folded | None, events: list[EventRow], limit: int) -> list[str]:
    """The owner's requests, oldest first, each in their words (cut at ASK_CHARS): the earlier
    summary's, then the folded events'; the oldest are dropped to fit `limit`, saying so."""
    asks = [a for a in (previous.asks if previous else ()) if not a.startswith("(")]
    for event in events:
        if event.kind == "user":
            text = " ".join(sent_text(event).split())
            files = _files_named(event).strip()
            if text:
                asks.append((f'"{text}"' if len(text) <= ASK_CHARS
                             else f'"{text[:ASK_CHARS - 1]}…"') + (f" {files}" if files else ""))
            elif files:  # a message of files alone: the files it sent are named still
                asks.append(files)
    dropped = 0
    while asks and sum(len(a) + 3 for a in asks) > limit:
        asks.pop(0)
        dropped += 1
    earlier = previous.asks[0] if previous and previous.asks and previous.asks[0].startswith(
        "(") else ""
    already = int(re.findall(r"\d+", earlier)[0]) if re.findall(r"\d+", earlier) else 0
    if dropped + already:
        asks.insert(0, f"({dropped + already} earlier requests are in the summary above)")
    return asks


def too_long(error: ModelError) -> bool:
    """Did the provider refuse the request because the prompt does not fit its window?
    (HTTP 413, or a 400 whose words say so.)"""
    if not isinstance(error, ProviderUnavailable):
        return False
    sentence = error.sentence
    if re.search(r"\bHTTP 413\b", sentence):
        return True
    return bool(re.search(r"\bHTTP 400\b", sentence)) and bool(_TOO_LONG.search(sentence))


def still_too_long(model_id: str, error: ModelError) -> str:
    """The ending's sentence when the compacted prompt was refused too."""
    return (f"{model_id} refused the prompt as too long even after the conversation was "
            f"compacted, so this turn could not be answered. Start a new chat, or choose a "
            f"model with a larger context window. ({error.sentence})")


def context_pct(prompt_tokens: int, estimated_chars: int, window: int) -> float | None:
    """The share of the window a prompt used, in percent (one decimal, rounded up so a
    measured prompt never reads 0): the provider's count when it gave one, else Hearth's
    estimate of what it sent; None when neither is known."""
    tokens = prompt_tokens or math.ceil(estimated_chars / CHARS_PER_TOKEN)
    if tokens <= 0 or window <= 0:
        return None
    return math.ceil(1000.0 * tokens / window) / 10


def size(message: Message) -> int:
    """A message's size on the wire, roughly, in characters: a tool call's arguments as the
    JSON string the wire carries them in (quoted, escaped), in the call's own framing."""
    return (len(message.text) + MESSAGE_OVERHEAD
            + sum(len(json.dumps(json.dumps(c.arguments))) + len(c.name) + CALL_OVERHEAD
                  for c in message.tool_calls))


def sizes(messages: list[Message]) -> int:
    return sum(size(m) for m in messages)
