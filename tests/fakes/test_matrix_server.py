"""The fake homeserver speaks Matrix: matrix-nio's own AsyncClient (encryption off) reads its
/sync answers (timeline events, no summary unless asked, as Synapse; invites), sends through it
(the same txnId twice is one event), shows typing, learns who it is, and reads a room's state
(members joined and invited, encryption) as the room grows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from nio import (
    AsyncClient,
    AsyncClientConfig,
    RoomGetStateError,
    RoomGetStateEventError,
    RoomGetStateEventResponse,
    RoomGetStateResponse,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)

from tests.fakes.matrix_server import BOT, TOKEN, FakeMatrix


@pytest.fixture
def fake() -> Iterator[FakeMatrix]:
    with FakeMatrix() as server:
        yield server


def _client(fake: FakeMatrix) -> AsyncClient:
    client = AsyncClient(fake.url, BOT, device_id="HEARTHDEV", store_path="",
                         config=AsyncClientConfig(encryption_enabled=False))
    client.access_token = TOKEN
    return client


def test_nio_syncs_sends_and_types_through_it(fake: FakeMatrix) -> None:
    fake.room("!dm:example.org", ["@ann:example.org"])
    fake.message("!dm:example.org", "@ann:example.org", "hello")

    async def talk() -> tuple[object, ...]:
        client = _client(fake)
        try:
            who = await client.whoami()
            first = await client.sync(timeout=0)
            sent = await client.room_send("!dm:example.org", "m.room.message",
                                          {"msgtype": "m.text", "body": "hi"}, tx_id="t1")
            again = await client.room_send("!dm:example.org", "m.room.message",
                                           {"msgtype": "m.text", "body": "hi"}, tx_id="t1")
            await client.room_typing("!dm:example.org", True, timeout=5000)
            assert isinstance(first, SyncResponse)
            later = await client.sync(timeout=100, since=first.next_batch)
            return who, first, sent, again, later
        finally:
            await client.close()

    who, first, sent, again, later = asyncio.run(talk())
    assert isinstance(who, WhoamiResponse) and who.user_id == BOT
    assert isinstance(first, SyncResponse)
    room = first.rooms.join["!dm:example.org"]
    assert [e.source["content"]["body"] for e in room.timeline.events] == ["hello"]
    assert room.summary is None or room.summary.joined_member_count is None  # Synapse sends
    # no summary unless members are lazy-loaded (nio then makes an empty one)
    assert isinstance(sent, RoomSendResponse) and isinstance(again, RoomSendResponse)
    assert sent.event_id == again.event_id and len(fake.sent) == 1  # one txnId, one event
    assert fake.typing == ["!dm:example.org"]
    assert isinstance(later, SyncResponse)
    assert [e.source["content"]["body"] for e in later.rooms.join["!dm:example.org"]
            .timeline.events] == ["hi"]  # its own message comes back, as on Matrix


def test_members_and_encryption_come_as_state_in_the_timeline_and_in_the_rooms_state(
        fake: FakeMatrix) -> None:
    fake.room("!dm:example.org", ["@ann:example.org"])
    fake.summaries = True

    async def talk() -> tuple[object, ...]:
        client = _client(fake)
        try:
            first = await client.sync(timeout=0)
            assert isinstance(first, SyncResponse)
            fake.join("!dm:example.org", "@bob:example.org")
            fake.invite_member("!dm:example.org", "@ann:example.org", "@cy:example.org")
            fake.encrypt("!dm:example.org", "@ann:example.org")
            later = await client.sync(timeout=100, since=first.next_batch)
            state = await client.room_get_state("!dm:example.org")
            on = await client.room_get_state_event("!dm:example.org", "m.room.encryption")
            none = await client.room_get_state_event("!dm:example.org", "m.room.topic")
            stranger = await client.room_get_state("!elsewhere:example.org")
            return later, state, on, none, stranger
        finally:
            await client.close()

    later, state, on, none, stranger = asyncio.run(talk())
    assert isinstance(later, SyncResponse)
    room = later.rooms.join["!dm:example.org"]
    assert [(e.source["type"], e.source.get("state_key"),
             e.source["content"].get("membership")) for e in room.timeline.events] == [
        ("m.room.member", "@bob:example.org", "join"),
        ("m.room.member", "@cy:example.org", "invite"),
        ("m.room.encryption", "", None)]
    assert room.summary is not None and (room.summary.joined_member_count,
                                         room.summary.invited_member_count) == (3, 1)
    assert isinstance(state, RoomGetStateResponse)
    assert {(e["state_key"], e["content"].get("membership")) for e in state.events} == {
        (BOT, "join"), ("@ann:example.org", "join"), ("@bob:example.org", "join"),
        ("@cy:example.org", "invite"), ("", None)}
    assert isinstance(on, RoomGetStateEventResponse) and on.content["algorithm"]
    assert isinstance(none, RoomGetStateEventError) and none.status_code == "M_NOT_FOUND"
    assert isinstance(stranger, RoomGetStateError)


def test_the_bot_joins_an_invite_as_a_member_event(fake: FakeMatrix) -> None:
    fake.invite("!new:example.org", "@ann:example.org", [])

    async def talk() -> object:
        client = _client(fake)
        try:
            first = await client.sync(timeout=0)
            assert isinstance(first, SyncResponse) and "!new:example.org" in first.rooms.invite
            await client.join("!new:example.org")
            return await client.sync(timeout=100, since=first.next_batch)
        finally:
            await client.close()

    later = asyncio.run(talk())
    assert isinstance(later, SyncResponse)
    [joined] = later.rooms.join["!new:example.org"].timeline.events
    assert (joined.source["state_key"], joined.source["content"]) == (BOT, {"membership": "join"})
