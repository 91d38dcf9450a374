"""Forgetting leaves no bytes: once a chat is deleted, or a Temporary chat has ended, no file
under HEARTH_HOME — the database, its -wal and -shm, logs, folders — holds a byte of what was
said in it, a kill -9 right after the deletion's answer included. Every scan has a positive
control: the same scan finds the words of a chat that was kept, and found the forgotten
chat's words before it was forgotten."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from hearth.engine.runtime import Engine
from tests.engine.test_delete_chat import wait_until
from tests.engine_harness import blocking, make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway

# Words the keyword index keeps whole (its Porter stemmer leaves them as they are)
FORGOTTEN = "quokkaxylophonz"  # said only in the chat that is forgotten
KEPT = "narwhalzeppelin"  # said only in the chat that is kept


def holding(home: Path, word: str) -> list[str]:
    """Every file under `home` whose bytes contain `word`, read byte by byte."""
    needle = word.encode()
    return sorted(str(path.relative_to(home)) for path in home.rglob("*")
                  if path.is_file() and needle in path.read_bytes())


def indexed(engine: Engine, word: str) -> bool:
    """Whether a segment of the keyword index holds `word`'s bytes."""
    blocks = blocking(lambda: engine.db.reading(lambda conn: list(
        conn.exec_driver_sql("SELECT block FROM memory_fts_data").scalars())))
    return any(word.encode() in bytes(block) for block in blocks if block)


def talk(api: Api, server: ScriptedModelServer, key: str, word: str,
         command: bool = False) -> None:
    """A few exchanges carrying `word` in the user's messages and the answers (and, with
    `command`, in a command the agent runs: the ledger and the audit see it too)."""
    if command:
        server.push(Reply(tool_calls=[Call("shell", {"command": f"echo {word} >/dev/null"})]),
                    Reply(text=f"Ran it for {word}.", chunks=1))
        assert api.wait(api.send(key, f"run it for {word}")["run_id"])["status"] == "complete"
    for n in range(3):
        server.push(Reply(text=f"Answer {n}: {word} noted, {word}.", chunks=1))
        assert api.wait(api.send(key, f"note {n}: the word is {word}")["run_id"])[
            "status"] == "complete"


@pytest.mark.process_gateway  # a kill -9
def test_a_deleted_chat_leaves_no_byte_of_its_text_even_killed_right_after(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """Before: the rows were deleted but the write-ahead log kept every frame that had held
    them; the DELETE answered 200 and, killed right after, the gateway left hearth.db-wal
    holding the word (the audit row of the command kept it too, in `detail.target`)."""
    gateway.log = gateway.home.parent / "gateway.log"  # the harness's file, not Hearth's
    api = gateway.client()
    forgotten, kept = api.new_chat(), api.new_chat()
    talk(api, model_server, forgotten, FORGOTTEN, command=True)
    talk(api, model_server, kept, KEPT)
    assert holding(gateway.home, FORGOTTEN)  # on disk before the deletion

    answer = api.http.delete(f"/api/sessions/{forgotten}")
    assert answer.status_code == 200, answer.text
    gateway.kill()  # kill -9 at once: no checkpoint at close, nothing of a graceful stop

    assert holding(gateway.home, FORGOTTEN) == []
    assert holding(gateway.home, KEPT)  # the same scan finds a kept chat's words


@pytest.mark.process_gateway  # a kill -9
def test_an_ended_temporary_chat_leaves_no_byte_of_its_text_within_a_second(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """Before: the idle sweep forgot the chat (404) but hearth.db-wal still held the word,
    and went on holding it while the gateway ran."""
    gateway = gateway_factory(config="[limits]\ntemporary_idle_seconds = 1\n", start=False)
    gateway.log = gateway.home.parent / "gateway.log"
    gateway.start()
    api = gateway.client()
    temporary, kept = api.new_chat(memory_mode="temporary"), api.new_chat()
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "note.txt",
                                                            "content": FORGOTTEN})]),
                      Reply(text=f"Wrote {FORGOTTEN}.", chunks=1))
    api.wait(api.send(temporary, f"write down {FORGOTTEN}")["run_id"])
    talk(api, model_server, temporary, FORGOTTEN)
    talk(api, model_server, kept, KEPT)
    assert holding(gateway.home, FORGOTTEN)

    wait_until(lambda: api.http.get(f"/api/sessions/{temporary}").status_code == 404)
    wait_until(lambda: holding(gateway.home, FORGOTTEN) == [], timeout=1.0)

    assert holding(gateway.home, KEPT)
    gateway.kill()
    assert holding(gateway.home, FORGOTTEN) == []


def test_memory_filed_under_a_deleted_chat_leaves_no_word_in_the_keyword_index(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: the items went from memory_items, but FTS5 kept their words in the segments of
    `memory_fts_data` until a merge that might never come: the word stayed in hearth.db."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> None:
        await engine.start()
        try:
            key, other = new_chat(engine), new_chat(engine)
            model_server.push(Reply(text="Hello."), Reply(text="Hello."))
            await turn(engine, key, "hi")
            await turn(engine, other, "hi")
            def remember(words: str, under: str) -> None:
                engine.memory.remember(kind="fact", words=words, written_by="test",
                                       filed_under=under)

            def search(words: str) -> list[str]:
                return [h.item.text for h in engine.memory.search(words)]

            await asyncio.to_thread(remember, f"Owner keeps a {FORGOTTEN}", key)
            for n in range(20):  # later segments, merged with the first by FTS5's automerge
                await asyncio.to_thread(remember, f"Owner likes {KEPT} number {n}", other)
            assert await asyncio.to_thread(search, FORGOTTEN) == [f"Owner keeps a {FORGOTTEN}"]
            assert indexed(engine, FORGOTTEN) and holding(tmp_path, FORGOTTEN)

            assert (await engine.delete_chat(key)).removed["memory_items"] == 1

            assert not indexed(engine, FORGOTTEN)
            assert holding(tmp_path, FORGOTTEN) == []
            assert holding(tmp_path, KEPT) and await asyncio.to_thread(search, KEPT)
            assert await asyncio.to_thread(search, FORGOTTEN) == []
        finally:
            await engine.close()

    asyncio.run(body())
