"""When a job fires: the pure computation of its next fire time, and the checks of what a
schedule may be (a cron expression field by field, a time zone, a one-shot time).

A job's schedule is one of: once (`next_at` only), every N seconds, or a cron expression in an
IANA time zone. Cron times are wall-clock times in the job's zone, walked by croniter on naive
local times (so its arithmetic knows nothing of DST) and turned into UTC epoch seconds here,
with two rules: a wall time that does not exist (a spring-forward gap) fires at the first valid
time after it, once; a wall time that exists twice (fall-back) fires at its first occurrence,
once. Everything takes `now`/`after` as an argument: nothing here reads the clock but
`local_zone_name` (the gateway's own zone, the default) and `at_of` when not given `now`.
"""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo, available_timezones

__all__ = ["FIELDS", "MISSED", "BadSchedule", "Schedule", "at_of", "check_cron", "describe",
           "instant_of", "local_zone_name", "next_cron", "upcoming", "zone_of"]

MISSED = ("once", "skip")
MAX_CRON = 200
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# (name, lowest, highest, names allowed for values)
FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                      "nov", "dec")),
    ("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_ORDINAL = ("1st", "2nd", "3rd", "4th", "5th")
_ITEM = re.compile(r"(?P<base>\*|\?|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/(?P<step>[0-9]+))?")


class BadSchedule(ValueError):
    """A schedule that cannot be kept; `sentence` says why, `code` names the refusal."""

    def __init__(self, sentence: str, code: str = "invalid_request") -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.code = code


class Schedule(Protocol):
    """What of a job its next fire time depends on."""

    @property
    def every_seconds(self) -> int | None: ...
    @property
    def cron(self) -> str | None: ...
    @property
    def timezone(self) -> str | None: ...
    @property
    def next_at(self) -> float: ...


# ------------------------------------------------------------------ zones


def local_zone_name() -> str:
    """The gateway's own IANA zone: $TZ if it names one, else /etc/localtime's target, else
    /etc/timezone, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    with_link = Path("/etc/localtime")
    if with_link.is_symlink():
        target = str(with_link.resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    for name in candidates:
        if name and _known(name):
            return name
    return "UTC"


def _known(name: str) -> bool:
    return name in ("UTC", "Etc/UTC") or name in _zones()


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def zone_of(name: object) -> str:
    """The zone a job runs in: `name` when it is a known IANA zone, the gateway's own when
    none is given."""
    if name is None or name == "":
        return local_zone_name()
    if not isinstance(name, str) or len(name) > 64 or not _known(name):
        shown = str(name)[:64]
        raise BadSchedule(f"'{shown}' is not a time zone this gateway knows; give an IANA name "
                          "such as Europe/Paris or America/New_York. No job was made.",
                          "invalid_timezone")
    return name


# ------------------------------------------------------------------ wall time to instant


def instant_of(wall: datetime, zone: str) -> float:
    """The UTC instant of a naive wall-clock time in `zone`: its first occurrence when it
    exists twice (fall-back), the first valid minute after it when it does not exist."""
    tz = ZoneInfo(zone)
    for _ in range(24 * 60):  # no gap is longer than a day
        placed = wall.replace(tzinfo=tz, fold=0)
        if placed.astimezone(ZoneInfo("UTC")).astimezone(tz).replace(tzinfo=None) == wall:
            return placed.timestamp()
        wall = (wall + timedelta(minutes=1)).replace(second=0, microsecond=0)
    raise BadSchedule(f"No valid time follows {wall.isoformat()} in {zone}.")


def _wall(at: float, zone: str) -> datetime:
    return datetime.fromtimestamp(at, ZoneInfo(zone)).replace(tzinfo=None)


# ------------------------------------------------------------------ cron


def check_cron(expression: object) -> str:
    """The expression, its fields checked one by one (a sentence naming the field and what is
    wrong with it), then by croniter; whitespace collapsed."""
    if not isinstance(expression, str) or not expression.strip() \
            or len(expression) > MAX_CRON:
        raise _bad_cron(f"A cron expression is 1 to {MAX_CRON} characters of text")
    text = " ".join(expression.lower().split())
    if text.startswith("@"):
        if text not in MACROS:
            raise _bad_cron(f"'{text}' is not one of {', '.join(MACROS)}")
        return text
    fields = text.split(" ")
    if len(fields) != 5:
        raise _bad_cron(f"'{text}' has {len(fields)} field{'s' if len(fields) != 1 else ''}; "
                        "a cron expression has five: minute hour day-of-month month "
                        "day-of-week")
    for index, field in enumerate(fields):
        _check_field(index, field, _column(fields, index))
    from croniter import CroniterError, croniter  # at a job's first cron, not every start

    try:
        croniter(text, datetime(2000, 1, 1))
    except CroniterError as error:
        raise _bad_cron(f"'{text}' does not parse: {error}") from error
    return text


def _column(fields: list[str], index: int) -> int:
    return sum(len(f) + 1 for f in fields[:index]) + 1


def _check_field(index: int, field: str, column: int) -> None:
    name, low, high, names = FIELDS[index]
    where = f"the {name} field ({_ORDINAL[index]} field, at character {column})"
    for item in field.split(","):
        found = _ITEM.fullmatch(item)
        if found is None:
            if any(mark in item for mark in ("l", "w", "#")) and index in (2, 4):
                continue  # croniter's last/nearest/nth forms: croniter judges them
            raise _bad_cron(f"{where} '{item}' is not a value, a range (a-b), * or a step "
                            "(/n)")
        if found["step"] is not None and int(found["step"]) == 0:
            raise _bad_cron(f"{where} '{item}' has a step of 0")
        if found["base"] in ("*", "?"):
            continue
        for part in found["base"].split("-"):
            _check_value(where, part, low, high, names)


def _check_value(where: str, part: str, low: int, high: int, names: tuple[str, ...]) -> None:
    if part.isdigit():
        if not low <= int(part) <= high:
            raise _bad_cron(f"{where} '{part}' is out of range ({low}-{high})")
    elif part not in names:
        known = f" or one of {', '.join(names)}" if names else ""
        raise _bad_cron(f"{where} '{part}' is not a number from {low} to {high}{known}")


def _bad_cron(what: str) -> BadSchedule:
    return BadSchedule(f"Invalid cron expression: {what}. No job was made.", "invalid_cron")


def next_cron(expression: str, zone: str, after: float) -> float:
    """The first fire time of the expression in `zone` strictly later than `after`."""
    from croniter import CroniterBadDateError, croniter  # at a job's first cron

    try:
        walk = croniter(expression, _wall(after, zone))
        for _ in range(10_000):
            instant = instant_of(walk.get_next(datetime), zone)
            if instant > after:
                return instant
    except CroniterBadDateError as error:
        raise _bad_cron(f"'{expression}' never comes (no such date)") from error
    raise _bad_cron(f"'{expression}' does not come within any reasonable time")


# ------------------------------------------------------------------ one-shot times

_IN = re.compile(r"in (\d{1,6}) ?(minutes?|mins?|m|hours?|hrs?|h|days?|d)")
_CLOCK = r"(\d{1,2})(?::(\d{2}))? ?(am|pm)?"
_AT_DAY = re.compile(rf"(?:at )?{_CLOCK}(?: (today|tomorrow))?")
_DAY_AT = re.compile(rf"(today|tomorrow) (?:at )?{_CLOCK}")
_UNIT = {"m": 60, "h": 3600, "d": 86400}


def at_of(text: object, zone: str, now: float) -> float:
    """The instant of a one-shot time: an ISO 8601 date-time (local to `zone` unless it
    carries an offset), or "in 20 minutes", "at 9:00 tomorrow", "tomorrow 9:00", "at 17:30"
    (today, or tomorrow when that is past). It must be later than `now`."""
    if not isinstance(text, str) or not text.strip() or len(text) > 64:
        raise _bad_at("Give the time as an ISO 8601 date-time (2026-12-24T09:00)")
    said = " ".join(text.strip().lower().split())
    instant = _phrase(said, zone, now)
    if instant is None:
        try:
            parsed = datetime.fromisoformat(text.strip())
        except ValueError as error:
            raise _bad_at(f"'{text.strip()[:64]}' is neither an ISO 8601 date-time "
                          "(2026-12-24T09:00) nor a phrase like 'in 20 minutes' or "
                          "'tomorrow 9:00'") from error
        instant = parsed.timestamp() if parsed.tzinfo else instant_of(parsed, zone)
    if instant <= now:
        raise _bad_at(f"'{text.strip()[:64]}' is in the past")
    return instant


def _phrase(said: str, zone: str, now: float) -> float | None:
    if found := _IN.fullmatch(said):
        return now + int(found[1]) * _UNIT[found[2][0]]
    if found := _AT_DAY.fullmatch(said):
        hour, minute, half, day = found[1], found[2], found[3], found[4]
    elif found := _DAY_AT.fullmatch(said):
        day, hour, minute, half = found[1], found[2], found[3], found[4]
    else:
        return None
    if minute is None and half is None and not said.startswith("at ") and day is None:
        return None  # a bare number is no time
    clock = _clock(int(hour), int(minute or 0), half, said)
    today = _wall(now, zone).replace(hour=clock[0], minute=clock[1], second=0, microsecond=0)
    when = today + timedelta(days=1 if day == "tomorrow" else 0)
    instant = instant_of(when, zone)
    if day is None and instant <= now:
        instant = instant_of(today + timedelta(days=1), zone)
    return instant


def _clock(hour: int, minute: int, half: str | None, said: str) -> tuple[int, int]:
    if half is not None:
        if not 1 <= hour <= 12:
            raise _bad_at(f"'{said}': with am or pm the hour is 1 to 12")
        hour = hour % 12 + (12 if half == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise _bad_at(f"'{said}' is not a time of day")
    return hour, minute


def _bad_at(what: str) -> BadSchedule:
    return BadSchedule(f"{what}; no job was made.", "invalid_at")


# ------------------------------------------------------------------ a job's next time


def upcoming(job: Schedule, after: float) -> float | None:
    """The job's first fire time later than `after`: None for a one-shot (it is done)."""
    if job.cron is not None:
        return next_cron(job.cron, job.timezone or "UTC", after)
    if job.every_seconds is not None:
        if job.next_at > after:
            return job.next_at
        skipped = int((after - job.next_at) // job.every_seconds) + 1
        return job.next_at + skipped * job.every_seconds
    return None


_DAYS = {"*": "every day", "1-5": "every weekday", "mon-fri": "every weekday",
         "0,6": "every weekend day", "6,0": "every weekend day", "sat,sun": "every weekend day"}
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
             "Sunday")


def describe(job: Schedule) -> str:
    """The schedule in words, without its next time: "every weekday at 09:00
    (Europe/Paris)", "cron 0 */2 * * * (UTC)", "every 30 min", "once"."""
    if job.cron is not None:
        return f"{_cron_words(job.cron)} ({job.timezone})"
    if job.every_seconds is not None:
        return f"every {job.every_seconds // 60} min"
    return "once"


def _cron_words(expression: str) -> str:
    fields = expression.split(" ")
    if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit() \
            and fields[2] == "*" and fields[3] == "*":
        at = f"at {int(fields[1]):02d}:{int(fields[0]):02d}"
        if fields[4] in _DAYS:
            return f"{_DAYS[fields[4]]} {at}"
        if fields[4].isdigit():
            return f"every {_WEEKDAYS[int(fields[4])]} {at}"
    return f"cron {expression}"
