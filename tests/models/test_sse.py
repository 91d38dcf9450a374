"""The event-stream reader the provider adapters read their raw answers with
(`hearth.models.sse`), on the lines an SDK's raw response gives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hearth.models.sse import Event, events


def read(*lines: str) -> list[Event]:
    async def given() -> AsyncIterator[str]:
        for line in lines:
            yield line

    async def run() -> list[Event]:
        return [event async for event in events(given())]

    return asyncio.run(run())


def test_each_event_ends_at_its_empty_line_with_its_name_and_data() -> None:
    assert read("event: message_start", 'data: {"a": 1}', "", 'data: {"b": 2}', "") == [
        Event("message_start", '{"a": 1}'), Event("", '{"b": 2}')]


def test_data_lines_join_and_one_leading_space_is_dropped() -> None:
    assert read("data: one", "data:two", "data:  three", "") == [Event("", "one\ntwo\n three")]


def test_comments_other_fields_and_events_without_data_are_skipped() -> None:
    assert read(": keep-alive", "", "event: ping", "", "id: 7", "retry: 10", "data: x", "") == [
        Event("", "x")]


def test_an_empty_data_line_is_an_event_with_empty_data() -> None:
    assert read("event: e", "data:", "") == [Event("e", "")]


def test_an_event_the_stream_ends_in_the_middle_of_is_dropped() -> None:
    assert read("data: whole", "", "data: half") == [Event("", "whole")]
