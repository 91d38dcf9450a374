"""Forgetting leaves no bytes: once a chat is deleted, or a Temporary chat has ended, no file
under HEARTH_HOME — the database, its -wal and -shm, logs, folders, the files it was sent —
holds a byte of what was said in it, a kill -9 right after the deletion's answer included.
Every scan has a positive control: the same scan finds the words of a chat that was kept,
and found the forgotten chat's words before it was forgotten. A restricted chat's helpers
(`spawn_helpers`: chats titled with the task's words, the task their first message) go with
it, all the way down."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hearth.engine.runtime import Engine
from tests.engine_harness import blocking, make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.polling import until
from tests.support.store import audit_rows

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


def helpers_of(home: Path, key: str) -> list[str]:
    """The chats whose `parent_key` names `key`, read straight from the file."""
    with closing(sqlite3.connect(home / "hearth.db", timeout=30)) as conn:
        return [found for (found,) in conn.execute(
            "SELECT key FROM sessions WHERE parent_key = ?", (key,))]


def spawn(task: str) -> Reply:
    return Reply(tool_calls=[Call("spawn_helpers", {"tasks": [task]})])


def report_in(api: Api, key: str) -> dict[str, Any]:
    """The first helper's report admitted into the chat (once it is there)."""
    found: list[dict[str, Any]] = []

    def arrived() -> bool:
        found[:] = [m for m in api.messages(key)
                    if m["kind"] == "user" and "helper_report" in m["meta"]]
        return bool(found)

    until(arrived)
    return found[0]


def attach(api: Api, server: ScriptedModelServer, key: str, word: str) -> None:
    """A file carrying `word` sent to the chat: kept in its folder as an attachment."""
    made = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "notes.txt"},
                         content=f"The file's word is {word}.\n".encode())
    assert made.status_code == 201, made.text
    server.push(Reply(text="Read the file.", chunks=1))
    sent = api.http.post(f"/api/sessions/{key}/messages",
                         json={"text": "read this", "attachments": [made.json()["id"]]})
    assert api.wait(sent.json()["run_id"])["status"] == "complete"


def attached(home: Path, word: str) -> list[str]:
    """The attachment files under `home` holding `word`."""
    return [path for path in holding(home, word) if "/attachments/" in path]


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
    attach(api, model_server, forgotten, FORGOTTEN)
    attach(api, model_server, kept, KEPT)
    assert holding(gateway.home, FORGOTTEN)  # on disk before the deletion
    assert attached(gateway.home, FORGOTTEN)  # its file too

    answer = api.http.delete(f"/api/sessions/{forgotten}")
    assert answer.status_code == 200, answer.text
    gateway.kill()  # kill -9 at once: no checkpoint at close, nothing of a graceful stop

    assert holding(gateway.home, FORGOTTEN) == []
    assert holding(gateway.home, KEPT)  # the same scan finds a kept chat's words
    assert attached(gateway.home, KEPT)  # and its file


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
    attach(api, model_server, temporary, FORGOTTEN)  # while the chat is busy: never idle
    talk(api, model_server, temporary, FORGOTTEN)
    attach(api, model_server, kept, KEPT)
    talk(api, model_server, kept, KEPT)
    assert holding(gateway.home, FORGOTTEN)
    assert attached(gateway.home, FORGOTTEN)

    until(lambda: api.http.get(f"/api/sessions/{temporary}").status_code == 404)
    until(lambda: holding(gateway.home, FORGOTTEN) == [], timeout=1.0)

    assert holding(gateway.home, KEPT)
    assert attached(gateway.home, KEPT)
    gateway.kill()
    assert holding(gateway.home, FORGOTTEN) == []


def test_an_incognito_chats_helpers_go_with_it_all_the_way_down(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """Before: DELETE answered 200, but the helper's chat and its helper's (titled with the
    task's words, the task their first message) stayed in hearth.db, each naming its parent."""
    api = gateway.client()
    kept = api.new_chat()
    talk(api, model_server, kept, KEPT)
    model_server.default = Reply(text="Done.", chunks=1)
    parent = api.new_chat(memory_mode="incognito")
    model_server.push(spawn(f"look up the {FORGOTTEN}"))
    api.wait(api.send(parent, "hand it to a helper")["run_id"])
    api.wait(report_in(api, parent)["run_id"])  # the helper ran, and its report's turn ended
    [helper] = helpers_of(gateway.home, parent)
    assert api.http.patch(f"/api/sessions/{helper}",
                          json={"trust": "trusted"}).status_code == 200
    model_server.push(spawn(f"look deeper into the {FORGOTTEN}"))
    api.wait(api.send(helper, "hand it on")["run_id"])
    api.wait(report_in(api, helper)["run_id"])  # the helper's helper ran and reported
    [deeper] = helpers_of(gateway.home, helper)
    assert holding(gateway.home, FORGOTTEN)  # on disk before the deletion

    answer = api.http.delete(f"/api/sessions/{parent}")

    assert answer.status_code == 200, answer.text
    assert holding(gateway.home, FORGOTTEN) == []
    assert helpers_of(gateway.home, parent) == [] and helpers_of(gateway.home, helper) == []
    for key in (helper, deeper):
        assert api.http.get(f"/api/sessions/{key}").status_code == 404
    assert answer.json()["removed"]["helpers"] == 2  # the helper and its helper
    assert holding(gateway.home, KEPT)


def test_a_temporary_chats_helper_at_work_goes_with_it_when_it_ends(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """Before: the idle sweep forgot the chat, but its helper, still at work, kept its chat
    (titled with the task's words) and the task in hearth.db."""
    gateway = gateway_factory(config="[gateway]\nmax_concurrent_turns = 1\n\n"
                              "[limits]\ntemporary_idle_seconds = 2\n")
    api = gateway.client()
    kept = api.new_chat()
    talk(api, model_server, kept, KEPT)
    release = threading.Event()
    model_server.default = Reply(text="Still looking.", hold=release)  # the helper's turn
    parent = api.new_chat(memory_mode="temporary")
    # one turn at a time: the helper's turn starts once the asking turn has ended
    model_server.push(spawn(f"look up the {FORGOTTEN}"), Reply(text="Handed on.", chunks=1))
    try:
        api.wait(api.send(parent, "hand it to a helper")["run_id"])
        [helper] = helpers_of(gateway.home, parent)
        assert holding(gateway.home, FORGOTTEN)

        until(lambda: api.http.get(f"/api/sessions/{parent}").status_code == 404)

        assert helpers_of(gateway.home, parent) == []
        assert api.http.get(f"/api/sessions/{helper}").status_code == 404
        until(lambda: holding(gateway.home, FORGOTTEN) == [], timeout=2.0)
        [ended] = [row for row in audit_rows(gateway.home) if row["session_key"] == parent]
        assert ended["detail"]["why"] == "idle" and ended["detail"]["removed"]["helpers"] == 1
        assert holding(gateway.home, KEPT)
    finally:
        release.set()


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
