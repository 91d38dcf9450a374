"""Spending limits: what model calls may cost per UTC day and per UTC month, overall, per agent,
per app and for each job (`[limits]` in config.toml, the Settings page, `hearth apps add
--limit`).

Owns `Account` (whom a call is spent for: its chat's agent, the app it runs for, the job that
fired it; a contextvar the turn runner sets, inherited by every task of the turn), `Spending`
(the one tally of what was spent, read from the per-call record at start and added to as
calls end, with the reservations of the calls in flight) and `OverLimit`.

Before a call (the guard asks `reserve`), the most it can cost is reserved against every limit
it counts toward: its input estimated from its length (`CHARS_PER_TOKEN`) and its whole output
allowance (the request's, else the model's `max_output_tokens`). A call whose reservation would
take what is spent and reserved past a limit is not made: `OverLimit`, with a sentence naming
the limit, what was spent and when it resets. When the call ends (`Spending.ended`) its
reservation is let go and its real cost, from the usage its provider reported, is counted
(with none reported, `unreported`'s estimate: never $0). An audio call reserves what its
characters or seconds cost (`reserve_usage`). A
model with no price is held to no limit (the Settings page says so), and with no limit set no
call is estimated at all. A limit lowered below what is spent refuses the next call, never one
in flight.

The tally is this gateway's: it counts what the record held when it started and its own calls
since. With several gateways on one database (PostgreSQL) each also merges the record every
third of a lease (`merge`, from `engine/background/spending_sync.py`), so what another spent
counts here within seconds; only what the others' calls in flight have reserved is not seen.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from hearth.config import LimitsConfig, ModelConfig, SpendingLimits, SpendLimit
from hearth.models.pricing import price
from hearth.models.types import Completed, ModelError, ModelRequest, Usage

CHARS_PER_TOKEN = 3  # a cautious estimate of a request's tokens: it errs towards more
CHARS_PER_OUTPUT_TOKEN = 4  # an answer's tokens from its characters, when none were reported
Period = Literal["day", "month"]
Key = tuple[str, str, str]  # (period's start, kind of account, name)
WHERE = "Raise it on the Settings page or under [limits] in config.toml."


@dataclass(frozen=True)
class Account:
    """Whom a model call is spent for (None: not an agent's, an app's or a job's)."""

    agent: str | None = None
    app: str | None = None
    job: int | None = None


NOBODY = Account()  # the gateway's own work: held to the overall limits alone
_account: ContextVar[Account | None] = ContextVar("hearth_spending_account", default=None)


def account() -> Account:
    """The account the work running now spends for."""
    return _account.get() or NOBODY


@contextmanager
def charged_to(spent_for: Account) -> Iterator[Account]:
    """Count the model calls of the enclosed work (its tasks and threads too) to `spent_for`."""
    token = _account.set(spent_for)
    try:
        yield spent_for
    finally:
        _account.reset(token)


@dataclass(frozen=True)
class Cap:
    """One limit: `usd` per `period` for an account (`kind`: all, agent, app, job)."""

    kind: str
    name: str
    period: Period
    usd: float

    def label(self) -> str:
        """'the daily limit for the agent "coder" ($1.00)'."""
        adjective = "daily" if self.period == "day" else "monthly"
        of = {"all": "overall", "agent": f'for the agent "{self.name}"',
              "app": f'for the app "{self.name}"', "job": f"for job #{self.name}"}[self.kind]
        return f"the {adjective} spending limit {of} ({usd(self.usd)})"


def caps_of(limits: SpendingLimits, spent_for: Account) -> list[Cap]:
    """Every limit a call of `spent_for` counts toward."""
    found = _caps("all", "", limits)
    if spent_for.agent is not None and spent_for.agent in limits.agents:
        found += _caps("agent", spent_for.agent, limits.agents[spent_for.agent])
    if spent_for.app is not None and spent_for.app in limits.apps:
        found += _caps("app", spent_for.app, limits.apps[spent_for.app])
    if spent_for.job is not None:
        found += _caps("job", str(spent_for.job), limits.each_job)
    return found


def _caps(kind: str, name: str, limit: SpendLimit) -> list[Cap]:
    found = []
    if limit.usd_per_day is not None:
        found.append(Cap(kind, name, "day", limit.usd_per_day))
    if limit.usd_per_month is not None:
        found.append(Cap(kind, name, "month", limit.usd_per_month))
    return found


def period_start(period: Period, at: float) -> str:
    """The UTC day ('2026-12-04') or month ('2026-12') `at` falls in."""
    stamp = datetime.fromtimestamp(at, UTC)
    return stamp.strftime("%Y-%m-%d" if period == "day" else "%Y-%m")


def resets_at(period: Period, at: float) -> float:
    """When the period `at` falls in ends (the next UTC midnight, or first of a month)."""
    stamp = datetime.fromtimestamp(at, UTC)
    midnight = datetime(stamp.year, stamp.month, stamp.day, tzinfo=UTC)
    if period == "day":
        return (midnight + timedelta(days=1)).timestamp()
    year, month = divmod(stamp.month, 12)
    return datetime(stamp.year + year, month + 1, 1, tzinfo=UTC).timestamp()


def usd(amount: float) -> str:
    """'$1.25', '$0.02', '$0.011', '$0.0031': cents, and under a dollar up to 4 decimals."""
    if amount >= 1:
        return f"${amount:,.2f}"
    whole, _, cents = f"{amount:.4f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


def _in_words(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{round(hours / 24)} days"


def reset_words(period: Period, at: float) -> str:
    """'It resets at 00:00 UTC on 2026-12-05 (in 3 h 12 min).'"""
    ends = resets_at(period, at)
    when = datetime.fromtimestamp(ends, UTC).strftime("%H:%M UTC on %Y-%m-%d")
    return f"It resets at {when} (in {_in_words(ends - at)})."


class OverLimit(ModelError):
    """A call that would pass a spending limit, not made; `cap` is the limit, `retry_after`
    the seconds until it resets."""

    code = "spending_limit"

    def __init__(self, cap: Cap, sentence: str, retry_after: int) -> None:
        super().__init__(sentence)
        self.cap = cap
        self.retry_after = retry_after


def input_tokens(request: ModelRequest) -> int:
    """The tokens `request` sends, estimated from its length (erring towards more)."""
    chars = sum(len(m.text) + sum(len(c.arguments) for c in m.tool_calls)
                for m in request.messages)
    chars += sum(len(t.description) + len(str(t.parameters)) for t in request.tools)
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate(request: ModelRequest, entry: ModelConfig) -> float:
    """The most a call of `request` to `entry`'s model can cost, in US dollars: its input,
    and a whole answer of the output the call may use (`reserved_output`)."""
    cost = price(entry, Usage(tokens_in=input_tokens(request),
                              tokens_out=reserved_output(request, entry)))
    return cost or 0.0


def reserved_output(request: ModelRequest, entry: ModelConfig) -> int:
    """The output tokens a call is reserved for: the request's own cap, else the model's
    max output (`max_output_tokens`, which the owner sets on the model)."""
    return request.max_output_tokens or entry.max_output_tokens


def reservation_words(request: ModelRequest, entry: ModelConfig) -> str:
    """How a call's most is reckoned, as its refusal says it."""
    if request.max_output_tokens:
        return f"its input and an answer of up to {request.max_output_tokens:,} tokens"
    return (f"its input and an answer as long as the model's max output, "
            f"{entry.max_output_tokens:,} tokens; set a lower max output on the model "
            f"({entry.id}, Settings → Models) to reserve less")


def unreported(request: ModelRequest, streamed: int, done: Completed | None) -> Usage:
    """The usage of a call its provider reported none for (a stopped turn, a cut stream, a
    server that sends none): its input as the reservation estimates it, and its output from
    the `streamed` characters of text and the tool calls `done` asked for."""
    chars = streamed + (sum(len(str(c.arguments)) for c in done.tool_calls) if done else 0)
    return Usage(tokens_in=input_tokens(request),
                 tokens_out=math.ceil(chars / CHARS_PER_OUTPUT_TOKEN))


@dataclass(frozen=True)
class Spent:
    """What one account spent in one period, for the Usage and Settings pages."""

    cap: Cap
    spent: float
    resets_at: float


class Spending:
    """The tally of what was spent, per period and account, and the limits it is held to
    (`limits_of`: the live settings' `[limits]`; `entry_of`: the live model entries, whose
    prices count)."""

    def __init__(self, limits_of: Callable[[], LimitsConfig],
                 entry_of: Callable[[str], ModelConfig | None]) -> None:
        self._limits_of = limits_of
        self._entry_of = entry_of
        self._read: tuple[LimitsConfig, SpendingLimits] | None = None
        self.spent: defaultdict[Key, float] = defaultdict(float)
        self.reserved: defaultdict[Key, float] = defaultdict(float)

    def limits(self) -> SpendingLimits:
        """The spending limits of the live settings (read once per settings snapshot)."""
        live = self._limits_of()
        if self._read is None or self._read[0] is not live:
            self._read = (live, live.spending)
        return self._read[1]

    def load(self, rows: Sequence[tuple[str, str | None, str | None, int | None, float]]
             ) -> None:
        """Count what the record holds: (day, agent, app, job, cost) per group of calls."""
        for day, agent, app, job, cost in rows:
            self._count(_keys_of(day, Account(agent, app, job)), cost)

    def merge(self, rows: Sequence[tuple[str, str | None, str | None, int | None, float]]
              ) -> None:
        """Take in what the record holds now (rows as `load`'s), the other gateways' calls
        among it: each total becomes the larger of this tally's and the record's, so neither
        this gateway's calls not yet written nor another's recorded ones are left out."""
        recorded: defaultdict[Key, float] = defaultdict(float)
        for day, agent, app, job, cost in rows:
            for key in _keys_of(day, Account(agent, app, job)):
                recorded[key] += cost
        for key, total in recorded.items():
            if total > self.spent[key]:
                self.spent[key] = total

    def reserve(self, model_id: str, request: ModelRequest) -> Hold | None:
        """Reserve the most this call can cost against its limits, or OverLimit; None when
        no limit holds it (none set, or its model has no price)."""
        limits = self.limits()
        if limits.none:
            return None
        entry = self._entry_of(model_id)
        if entry is None or entry.price_in_per_mtok is None \
                or entry.price_out_per_mtok is None:
            return None
        caps = caps_of(limits, account())
        return (self._hold(caps, estimate(request, entry), reservation_words(request, entry))
                if caps else None)

    def reserve_usage(self, model_id: str, most: Usage) -> Hold | None:
        """Reserve what a call using at most `most` costs (read aloud's characters, a voice
        note's seconds), or OverLimit; None when no limit holds it."""
        limits = self.limits()
        if limits.none:
            return None
        cost = price(self._entry_of(model_id), most)
        caps = caps_of(limits, account())
        return self._hold(caps, cost) if caps and cost is not None else None

    def _hold(self, caps: list[Cap], most: float, reckoned: str | None = None) -> Hold:
        """`most` reserved against each of `caps`, or OverLimit when it would pass one
        (`reckoned`: how `most` was reckoned, as the refusal says it)."""
        at = time.time()
        keys = [_key(cap, at) for cap in caps]
        for cap, key in zip(caps, keys, strict=True):
            if self.spent[key] + self.reserved[key] + most > cap.usd + 1e-12:
                raise self._over(cap, key, at, most, reckoned)
        for key in keys:
            self.reserved[key] += most
        return Hold(keys, most)

    def refusal(self, spent_for: Account) -> OverLimit | None:
        """The limit `spent_for` has reached already (what it spent and reserved), if any:
        a job's fire is skipped, an app's turn refused, before anything is admitted."""
        at = time.time()
        for cap in caps_of(self.limits(), spent_for):
            key = _key(cap, at)
            if self.spent[key] + self.reserved[key] >= cap.usd:
                return self._over(cap, key, at, None)
        return None

    def _over(self, cap: Cap, key: Key, at: float, most: float | None,
              reckoned: str | None = None) -> OverLimit:
        spent = self.spent[key]
        when = "today" if cap.period == "day" else "this month"
        said = (f"{_upper(cap.label())} is reached: {usd(spent)} spent {when}")
        if most is not None:
            said += f", and this call could cost up to {usd(most)}"
            if reckoned:
                said += f" (reserved before it is sent: {reckoned})"
        reserved = self.reserved[key]
        if reserved:
            said += f" ({usd(reserved)} more held by calls running now)"
        sentence = f"{said}. {reset_words(cap.period, at)} {WHERE}"
        return OverLimit(cap, sentence, math.ceil(resets_at(cap.period, at) - at))

    def ended(self, hold: Hold | None, spent_for: Account, model_id: str,
              usage: Usage | None) -> None:
        """A call's end: its reservation (if it had one) let go, and its real cost, from the
        usage its provider reported (or the guard's estimate of it), counted for `spent_for`
        (every call of a priced model is counted, limited or not, so a limit set later starts
        from the truth)."""
        if hold is not None:
            for key in hold.keys:
                self.reserved[key] = max(0.0, self.reserved[key] - hold.most)
        cost = price(self._entry_of(model_id), usage) if usage is not None else None
        if cost:
            self._count(_keys_of(period_start("day", time.time()), spent_for), cost)

    def count(self, spent_for: Account, cost: float) -> None:
        """Count a paid call that is no model's (a web search) for `spent_for`, today."""
        if cost:
            self._count(_keys_of(period_start("day", time.time()), spent_for), cost)

    def _count(self, keys: list[Key], cost: float) -> None:
        for key in keys:
            self.spent[key] += cost

    def standing(self, at: float | None = None) -> list[Spent]:
        """Every limit set and what its account spent in the period now: the overall and
        per agent and app limits, and each job's for the jobs that spent this period."""
        at = time.time() if at is None else at
        limits = self.limits()
        caps = _caps("all", "", limits)
        for kind, named in (("agent", limits.agents), ("app", limits.apps)):
            caps += [cap for name in sorted(named) for cap in _caps(kind, name, named[name])]
        caps += [cap for job in self._jobs_spending(at)
                 for cap in _caps("job", job, limits.each_job)]
        return [Spent(cap, self.spent[_key(cap, at)], resets_at(cap.period, at))
                for cap in caps]

    def _jobs_spending(self, at: float) -> list[str]:
        month = period_start("month", at)
        return sorted({name for (start, kind, name) in self.spent
                       if kind == "job" and start == month}, key=int)


@dataclass(frozen=True)
class Hold:
    """One call's reservation: the most it can cost, held on these keys of the tally."""

    keys: list[Key]
    most: float


def _key(cap: Cap, at: float) -> Key:
    return (period_start(cap.period, at), cap.kind, cap.name)


def _keys_of(day: str, spent_for: Account) -> list[Key]:
    """The tally's keys a call on `day` counts in: overall, its agent, app and job, each by
    day and month (whether or not a limit names them: a limit set later counts them too)."""
    month = day[:7]
    accounts = [("all", "")]
    if spent_for.agent is not None:
        accounts.append(("agent", spent_for.agent))
    if spent_for.app is not None:
        accounts.append(("app", spent_for.app))
    if spent_for.job is not None:
        accounts.append(("job", str(spent_for.job)))
    return [(start, kind, name) for kind, name in accounts for start in (day, month)]


def _upper(text: str) -> str:
    return text[:1].upper() + text[1:]
