"""Next fire times with a frozen clock (every `after`/`now` passed in; nothing sleeps): cron in
Europe/Paris and America/New_York across each zone's 2026 spring-forward and fall-back, a
02:30 job on the spring-forward day, one-shot times, and invalid expressions named by field."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from hearth.engine.background import schedules
from hearth.engine.background.schedules import BadSchedule, at_of, check_cron, next_cron


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def fires(expression: str, zone: str, start: str, count: int) -> list[str]:
    """The next `count` fire times after `start` (UTC), as UTC 'YYYY-MM-DD HH:MM'."""
    seen, after = [], utc(start)
    for _ in range(count):
        after = next_cron(expression, zone, after)
        seen.append(datetime.fromtimestamp(after, UTC).strftime("%Y-%m-%d %H:%M"))
    return seen


WEEKDAYS_9 = "0 9 * * 1-5"


def test_weekday_nine_in_paris_across_spring_forward() -> None:
    # 29 March 2026: 02:00 CET becomes 03:00 CEST; 09:00 moves from 08:00Z to 07:00Z
    assert fires(WEEKDAYS_9, "Europe/Paris", "2026-03-26 00:00", 4) == [
        "2026-03-26 08:00", "2026-03-27 08:00", "2026-03-30 07:00", "2026-03-31 07:00"]


def test_weekday_nine_in_paris_across_fall_back() -> None:
    # 25 October 2026: 03:00 CEST becomes 02:00 CET; 09:00 moves from 07:00Z to 08:00Z
    assert fires(WEEKDAYS_9, "Europe/Paris", "2026-10-22 12:00", 3) == [
        "2026-10-23 07:00", "2026-10-26 08:00", "2026-10-27 08:00"]


def test_weekday_nine_in_new_york_across_spring_forward() -> None:
    # 8 March 2026: 02:00 EST becomes 03:00 EDT; 09:00 moves from 14:00Z to 13:00Z
    assert fires(WEEKDAYS_9, "America/New_York", "2026-03-05 15:00", 3) == [
        "2026-03-06 14:00", "2026-03-09 13:00", "2026-03-10 13:00"]


def test_weekday_nine_in_new_york_across_fall_back() -> None:
    # 1 November 2026: 02:00 EDT becomes 01:00 EST; 09:00 moves from 13:00Z to 14:00Z
    assert fires(WEEKDAYS_9, "America/New_York", "2026-10-29 14:00", 3) == [
        "2026-10-30 13:00", "2026-11-02 14:00", "2026-11-03 14:00"]


def test_the_same_cron_in_two_zones_is_two_different_instants() -> None:
    after = utc("2026-03-06 00:00")
    paris, new_york = (next_cron(WEEKDAYS_9, zone, after)
                       for zone in ("Europe/Paris", "America/New_York"))
    assert new_york - paris == 6 * 3600


@pytest.mark.parametrize(("zone", "start", "expected"), [
    # 02:30 does not exist on the spring-forward day: once, at 03:00 (the first valid time)
    ("Europe/Paris", "2026-03-28 02:00",
     ["2026-03-29 01:00", "2026-03-30 00:30", "2026-03-31 00:30"]),
    ("America/New_York", "2026-03-07 08:00",
     ["2026-03-08 07:00", "2026-03-09 06:30"]),
])
def test_a_0230_daily_job_on_the_spring_forward_day_fires_once_at_the_first_valid_time(
        zone: str, start: str, expected: list[str]) -> None:
    assert fires("30 2 * * *", zone, start, len(expected)) == expected


def test_a_wall_time_that_comes_twice_on_fall_back_fires_once() -> None:
    # Paris, 25 October: 02:30 comes at 00:30Z (CEST) and again at 01:30Z (CET)
    assert fires("30 2 * * *", "Europe/Paris", "2026-10-24 12:00", 2) == [
        "2026-10-25 00:30", "2026-10-26 01:30"]
    # New York, 1 November: 01:30 comes at 05:30Z (EDT) and again at 06:30Z (EST)
    assert fires("30 1 * * *", "America/New_York", "2026-10-31 12:00", 2) == [
        "2026-11-01 05:30", "2026-11-02 06:30"]


def test_a_half_hourly_job_fires_once_for_the_whole_gap() -> None:
    assert fires("*/30 * * * *", "Europe/Paris", "2026-03-29 00:15", 3) == [
        "2026-03-29 00:30", "2026-03-29 01:00", "2026-03-29 01:30"]


def test_asked_from_inside_the_repeated_hour_the_next_time_is_later() -> None:
    # 01:10Z on 25 October is 02:10 CET, the second 02:10 of the night in Paris
    after = utc("2026-10-25 01:10")
    assert next_cron("*/15 * * * *", "Europe/Paris", after) > after


# ------------------------------------------------------------------ one-shot times

NOW = utc("2026-12-02 10:00")  # 11:00 in Paris


@pytest.mark.parametrize(("said", "expected"), [
    ("2026-12-24T09:00", "2026-12-24 08:00"),
    ("2026-12-24 09:00", "2026-12-24 08:00"),
    ("2026-12-24T09:00+00:00", "2026-12-24 09:00"),
    ("in 20 minutes", "2026-12-02 10:20"),
    ("in 2 hours", "2026-12-02 12:00"),
    ("in 1 day", "2026-12-03 10:00"),
    ("at 9:00 tomorrow", "2026-12-03 08:00"),
    ("tomorrow 9:00", "2026-12-03 08:00"),
    ("Tomorrow at 9pm", "2026-12-03 20:00"),
    ("at 17:30", "2026-12-02 16:30"),
    ("at 9:00", "2026-12-03 08:00"),  # past today: tomorrow
])
def test_a_one_shot_time_is_read_in_the_jobs_zone(said: str, expected: str) -> None:
    got = at_of(said, "Europe/Paris", NOW)
    assert datetime.fromtimestamp(got, UTC).strftime("%Y-%m-%d %H:%M") == expected


def test_a_one_shot_in_a_gap_fires_at_the_first_valid_time() -> None:
    got = at_of("2027-03-28T02:30", "Europe/Paris", NOW)
    assert got == utc("2027-03-28 01:00")


@pytest.mark.parametrize(("said", "words"), [
    ("2026-12-01T09:00", "in the past"),
    ("yesterday", "neither an ISO 8601"),
    ("9", "neither an ISO 8601"),
    ("at 25:00", "not a time of day"),
    ("at 13pm", "1 to 12"),
    ("", "ISO 8601"),
])
def test_a_bad_one_shot_time_is_refused_with_a_sentence(said: str, words: str) -> None:
    with pytest.raises(BadSchedule) as bad:
        at_of(said, "Europe/Paris", NOW)
    assert words in bad.value.sentence and bad.value.code == "invalid_at"


# ------------------------------------------------------------------ invalid expressions


@pytest.mark.parametrize(("expression", "words"), [
    ("61 * * * *", "minute field (1st field, at character 1) '61' is out of range (0-59)"),
    ("0 24 * * *", "hour field (2nd field, at character 3) '24' is out of range (0-23)"),
    ("0 9 0 * *", "day-of-month field (3rd field, at character 5) '0' is out of range (1-31)"),
    ("0 9 * 13 *", "month field (4th field, at character 7) '13' is out of range (1-12)"),
    ("0 9 * * 1-9", "day-of-week field (5th field, at character 9) '9' is out of range (0-7)"),
    ("0 9 * * funday", "'funday' is not a number from 0 to 7 or one of sun"),
    ("*/0 * * * *", "minute field (1st field, at character 1) '*/0' has a step of 0"),
    ("0 9 * *", "has 4 fields; a cron expression has five"),
    ("0 0 30 2 *", "never comes"),
    ("@sometimes", "is not one of @yearly"),
    ("0 9 * * 1-5 x", "has 6 fields"),
])
def test_an_invalid_cron_expression_names_the_field_at_fault(expression: str,
                                                            words: str) -> None:
    with pytest.raises(BadSchedule) as bad:
        next_cron(check_cron(expression), "UTC", NOW)
    assert words in bad.value.sentence, bad.value.sentence
    assert bad.value.code == "invalid_cron"


def test_valid_expressions_are_kept_tidy() -> None:
    assert check_cron("  0   9 * *  MON-FRI ") == "0 9 * * mon-fri"
    assert check_cron("@daily") == "@daily"


def test_an_unknown_zone_is_refused_and_none_means_the_gateways_own() -> None:
    with pytest.raises(BadSchedule) as bad:
        schedules.zone_of("Mars/Olympus")
    assert bad.value.code == "invalid_timezone" and "Mars/Olympus" in bad.value.sentence
    assert schedules.zone_of(None) == schedules.local_zone_name()
    assert schedules.zone_of("America/New_York") == "America/New_York"


@dataclass
class Job:
    every_seconds: int | None = None
    cron: str | None = None
    timezone: str | None = None
    next_at: float = 0.0


def test_the_schedule_in_words() -> None:
    assert schedules.describe(Job(cron="0 9 * * 1-5", timezone="Europe/Paris")) == \
        "every weekday at 09:00 (Europe/Paris)"
    assert schedules.describe(Job(cron="30 7 * * *", timezone="UTC")) == \
        "every day at 07:30 (UTC)"
    assert schedules.describe(Job(cron="0 */2 * * *", timezone="UTC")) == \
        "cron 0 */2 * * * (UTC)"
    assert schedules.describe(Job(every_seconds=1800)) == "every 30 min"
    assert schedules.describe(Job()) == "once"


def test_upcoming_for_each_kind() -> None:
    assert schedules.upcoming(Job(), 100.0) is None
    assert schedules.upcoming(Job(every_seconds=60, next_at=100.0), 705.0) == 760.0
    assert schedules.upcoming(Job(cron="0 9 * * *", timezone="UTC"), NOW) == \
        utc("2026-12-03 09:00")
