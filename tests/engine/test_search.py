"""The engine's search: what it refuses to search (with a sentence), the day range made
times in the gateway's zone (both days included), and a snippet made plain text with the
places of its matched words, whatever marks the index left."""

from __future__ import annotations

from datetime import date, datetime, time

import pytest

from hearth.engine.operations import search
from hearth.errors import Refusal
from hearth.store.search import MARK_CLOSE, MARK_OPEN


@pytest.mark.parametrize(("asked", "code"), [
    (search.Asked(""), "invalid_query"),
    (search.Asked(" \n\t "), "invalid_query"),
    (search.Asked("x" * 201), "invalid_query"),
    (search.Asked("x", limit=0), "invalid_limit"),
    (search.Asked("x", limit=51), "invalid_limit"),
    (search.Asked("x", since=date(2026, 3, 2), until=date(2026, 3, 1)), "invalid_dates"),
])
def test_what_cannot_be_searched_is_refused_with_a_sentence(asked: search.Asked,
                                                            code: str) -> None:
    with pytest.raises(Refusal) as refused:
        search.checked(asked)
    assert refused.value.code == code and refused.value.status == 422
    assert refused.value.sentence.endswith(".")


def test_a_query_is_trimmed_and_a_tag_lowered() -> None:
    asked = search.checked(search.Asked("  garden \n plans ", tag=" Home ", folder=""))
    assert (asked.q, asked.tag, asked.folder) == ("garden plans", "home", None)


def test_the_day_range_includes_both_days_in_the_gateways_zone() -> None:
    asked = search.Asked("x", since=date(2026, 3, 1), until=date(2026, 3, 1))
    filters = search._filters(asked)
    start = datetime.combine(date(2026, 3, 1), time.min).timestamp()
    assert filters.since == start
    assert filters.until == datetime.combine(date(2026, 3, 2), time.min).timestamp()


@pytest.mark.parametrize(("snippet", "text", "marks"), [
    (f"a {MARK_OPEN}bc{MARK_CLOSE} d", "a bc d", [(2, 4)]),
    (f"{MARK_OPEN}ab{MARK_CLOSE}{MARK_OPEN}cd{MARK_CLOSE}", "abcd", [(0, 2), (2, 4)]),
    (f"x {MARK_CLOSE}y", "x y", []),  # a stray closing mark is dropped
    (f"x {MARK_OPEN}yz", "x yz", [(2, 4)]),  # a mark left open runs to the end
    (f"{MARK_OPEN}{MARK_CLOSE}x", "x", []),  # an empty mark marks nothing
    ("<b>\ud800</b>", "<b>\ufffd</b>", []),  # what JSON cannot carry is replaced
])
def test_a_snippet_becomes_text_and_the_places_of_its_marks(snippet: str, text: str,
                                                            marks: list[tuple[int, int]]) -> None:
    assert search.marked(snippet) == (text, marks)
