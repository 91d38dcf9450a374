"""The fake homeserver speaks Matrix: matrix-nio's own AsyncClient (encryption off) reads its
/sync answers (timeline events, a summary, invites), sends through it (the same txnId twice
is one event), shows typing and learns who it is."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from nio import AsyncClient, AsyncClientConfig, RoomSendResponse, SyncResponse, WhoamiResponse

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
    assert room.summary is not None and room.summary.joined_member_count == 2
    assert isinstance(sent, RoomSendResponse) and isinstance(again, RoomSendResponse)
    assert sent.event_id == again.event_id and len(fake.sent) == 1  # one txnId, one event
    assert fake.typing == ["!dm:example.org"]
    assert isinstance(later, SyncResponse)
    assert [e.source["content"]["body"] for e in later.rooms.join["!dm:example.org"]
            .timeline.events] == ["hi"]  # its own message comes back, as on Matrix
