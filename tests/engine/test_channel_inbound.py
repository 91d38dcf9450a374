"""A channel message's admission (`engine.intake.channel_inbound`): once per channel id, with the
cursor in the same transaction, into the chat its thread continues (a new one when that
chat is gone), with where the line came from written once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from hearth.engine.delivery import channel_delivery
from hearth.engine.intake import channel_inbound
from hearth.engine.intake.channel_inbound import Inbound
from hearth.engine.runtime import Engine
from hearth.sessions import chats
from hearth.store import channels as channel_store, transcript
from tests.engine_harness import make_config, make_engine
from tests.fakes.model_server import Reply, ScriptedModelServer

T = TypeVar("T")
MESSAGE = Inbound(channel="telegram", thread="42", inbound_id="1001", sender="42",
                  sender_name="Ann", text="hello", owner=True, owner_dm=True, cursor=1002)


def running(tmp_path: Path, server: ScriptedModelServer,
            body: Callable[[Engine], Awaitable[T]]) -> T:
    server.default = Reply(text="ok")
    engine = make_engine(tmp_path, make_config(server.openai_base_url))

    async def whole() -> T:
        await engine.start()
        try:
            return await body(engine)
        finally:
            await engine.close()

    return asyncio.run(whole())


def test_a_redelivered_message_is_admitted_once(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    async def body(engine: Engine) -> None:
        first = await channel_inbound.receive(engine, MESSAGE)
        again = await channel_inbound.receive(engine, replace(MESSAGE, cursor=1003))
        assert first.admitted is not None and first.opened
        assert again.admitted is None and again.session_key is None
        assert await channel_inbound.cursor_of(engine, "telegram") == 1003  # moved anyway
        key = first.session_key
        assert key is not None
        users = [e for e in await engine.db.reading(transcript.window, key, 100)
                 if e.kind == "user"]
        assert len(users) == 1
        assert (users[0].source_channel, users[0].source_thread, users[0].source_user) == (
            "telegram", "42", "42")
    running(tmp_path, model_server, body)


def test_the_cursor_never_moves_back(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    async def body(engine: Engine) -> None:
        await channel_inbound.receive(engine, MESSAGE)
        await channel_inbound.skip(engine, "telegram", 900)
        assert await channel_inbound.cursor_of(engine, "telegram") == 1002
    running(tmp_path, model_server, body)


def test_a_thread_whose_chat_is_gone_starts_a_new_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    async def body(engine: Engine) -> None:
        first = await channel_inbound.receive(engine, MESSAGE)
        same = await channel_inbound.receive(engine, replace(MESSAGE, inbound_id="1002"))
        assert same.session_key == first.session_key and not same.opened
        assert first.session_key is not None
        await chats.update(engine.db, first.session_key, archived=True)
        archived = await channel_inbound.receive(engine, replace(MESSAGE, inbound_id="1003"))
        assert archived.opened and archived.session_key != first.session_key
        assert archived.session_key is not None and archived.admitted is not None
        await engine.delete_chat(archived.session_key)
        assert await engine.db.reading(channel_store.of_thread, "telegram", "42") is None
        deleted = await channel_inbound.receive(engine, replace(MESSAGE, inbound_id="1004"))
        assert deleted.opened and deleted.admitted is not None
        assert deleted.admitted.seq == 1  # a chat of its own (a deleted chat's name is free)
    running(tmp_path, model_server, body)


def test_a_guests_message_is_marked_theirs(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    async def body(engine: Engine) -> None:
        guest = replace(MESSAGE, sender="7", sender_name="Bob", owner=False, owner_dm=False,
                        attachments=("report.pdf",), text="look")
        received = await channel_inbound.receive(engine, guest)
        assert received.session_key is not None
        [user] = [e for e in await engine.db.reading(transcript.window,
                                                     received.session_key, 100)
                  if e.kind == "user"]
        assert user.meta["guest"] == "Bob"
        assert user.content["text"].startswith("look\n\n[Attached: report.pdf.")
        link = await channel_delivery.link_of(engine, received.session_key)
        assert link is not None and not link.owner_dm
    running(tmp_path, model_server, body)
