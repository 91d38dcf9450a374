"""Deleting a chat: DELETE /api/sessions/{key} purges its transcript, runs, tool-call ledger,
approvals, own folder and the memory filed under it alone; it stops a running turn first,
writes one audit row without message text, and a purge that fails keeps the chat (409) until
a retry finishes it. A restricted chat's helpers go with it (a helper that cannot go keeps it);
a kept chat's helpers stay. Also: a chat's memory mode cannot be changed by PATCH."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth.engine.background import helper_agents
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.faults import fail_point
from hearth.privacy.principal import OWNER
from hearth.sessions import chats
from hearth.store import sessions as session_store
from hearth.store.schema import memory_items
from tests.engine_harness import blocking, make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.polling import until
from tests.support.store import audit_rows, rows_of

SECRET = "the vault code is pomegranate-7731"


def all_audit_text(home: Path) -> str:
    with closing(sqlite3.connect(home / "hearth.db", timeout=30)) as conn:
        return json.dumps(conn.execute("SELECT * FROM audit").fetchall())


def pending_for(api: Api, key: str) -> list[dict[str, Any]]:
    return [a for a in api.http.get("/api/approvals").json()["approvals"]
            if a["session"] == key]


def talk_with_a_tool_and_an_approval(api: Api, server: ScriptedModelServer, key: str) -> None:
    """Leave every kind of record: messages, runs, ledger rows, an answered approval."""
    server.push(Reply(tool_calls=[Call("write_file", {"path": "kept.txt", "content": "x"})]),
                Reply(text=f"Noted: {SECRET}"))
    run_id = api.send(key, SECRET)["run_id"]
    until(lambda: bool(pending_for(api, key)))
    approval = pending_for(api, key)[0]
    assert api.http.post(f"/api/approvals/{approval['id']}",
                         json={"decision": "allow_once"}).status_code == 200
    assert api.wait(run_id)["status"] == "complete"


def test_delete_purges_every_record_of_the_chat_and_nothing_of_another(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key, other = api.new_chat(trust="ask"), api.new_chat(trust="ask")
    talk_with_a_tool_and_an_approval(api, model_server, key)
    talk_with_a_tool_and_an_approval(api, model_server, other)
    for chat in (key, other):  # an upload each: its row and its bytes in the chat's folder
        assert api.http.post(f"/api/sessions/{chat}/attachments", params={"name": "a.txt"},
                             content=b"attached words").status_code == 201
    own = gateway.home / "sessions" / key
    (own / "scratch").mkdir(parents=True)
    (own / "scratch" / "draft.md").write_text("draft")
    before, other_before = rows_of(gateway.home, key), rows_of(gateway.home, other)
    assert all(before.values()), before  # every kind of record exists to be deleted

    answer = api.http.delete(f"/api/sessions/{key}")

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"deleted": True, "key": key, "removed": {
        "messages": before["transcript_events"], "runs": before["runs"],
        "tool_calls": before["tool_calls"], "approvals": before["approvals"],
        "attachments": before["attachments"], "memory_items": 0, "folder": True,
        "helpers": 0}}
    assert set(rows_of(gateway.home, key).values()) == {0}
    assert not own.exists() and (gateway.home / "sessions").is_dir()
    assert rows_of(gateway.home, other) == other_before  # another chat keeps everything
    assert (gateway.home / "workspace" / "kept.txt").exists()  # the shared workspace stays
    assert api.http.get(f"/api/sessions/{key}").status_code == 404
    listed = [s["key"] for s in api.http.get("/api/sessions").json()["sessions"]]
    assert key not in listed and other in listed
    again = api.http.delete(f"/api/sessions/{key}")
    assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"


def test_one_audit_row_names_the_deleted_chat_and_carries_no_message_text(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text=f"I will remember {SECRET}"))
    api.wait(api.send(key, SECRET)["run_id"])
    assert api.http.delete(f"/api/sessions/{key}").status_code == 200
    deleted = audit_rows(gateway.home)
    assert len(deleted) == 1
    row = deleted[0]
    assert row["session_key"] == key and row["actor"] == "owner"
    assert row["detail"]["outcome"] == "deleted" and row["detail"]["why"] == "deleted"
    assert row["detail"]["removed"]["messages"] == 2 and row["detail"]["removed"]["runs"] == 1
    assert "reason" not in row["detail"]
    assert "pomegranate" not in all_audit_text(gateway.home)


def test_delete_of_an_unknown_chat_is_404(gateway: Gateway) -> None:
    answer = gateway.client().http.delete("/api/sessions/no-such-chat")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "session_not_found"
    assert audit_rows(gateway.home) == []


def test_deleting_a_chat_stops_its_running_turn_first(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    late = gateway.home / "workspace" / "late.txt"
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "sleep 2; echo x > late.txt"})]),
                      Reply(text="never asked for"))
    first = api.send(key, "wait a long time")["run_id"]
    queued = api.send(key, "and then this")
    assert queued["status"] in ("queued", "steered")  # behind, or into, the running turn
    until(lambda: bool(api.http.get(f"/api/runs/{first}").json()["tool_calls"]))
    begun = time.monotonic()
    answer = api.http.delete(f"/api/sessions/{key}")
    assert answer.status_code == 200, answer.text
    assert time.monotonic() - begun < 5  # stopped, not the 30 s the command would run
    assert answer.json()["removed"]["runs"] == 2
    assert api.http.get(f"/api/runs/{first}").status_code == 404
    time.sleep(3)
    assert not late.exists()  # the command was stopped, not left to finish
    assert len(model_server.calls()) == 1  # neither the stopped nor the queued turn went on
    assert set(rows_of(gateway.home, key).values()) == {0}
    other = api.new_chat()  # the gateway goes on
    model_server.push(Reply(text="Still here."))
    assert api.wait(api.send(other, "hello?")["run_id"])["status"] == "complete"


def test_deleting_a_chat_cancels_its_approvals_and_wakes_the_waiting_call(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "a"})]))
    api.send(key, "write a")
    got: dict[str, httpx.Response] = {}

    def call_as_cli() -> None:  # a tool call for an agent CLI waits on the owner too
        with httpx.Client(base_url=gateway.url, timeout=30,
                          headers=api.http.headers) as client:
            got["answer"] = client.post(f"/api/sessions/{key}/tools/write_file",
                                        json={"arguments": {"path": "b.txt", "content": "b"}})

    waiter = threading.Thread(target=call_as_cli)
    waiter.start()
    until(lambda: len(pending_for(api, key)) == 2)
    begun = time.monotonic()
    answer = api.http.delete(f"/api/sessions/{key}")
    assert answer.status_code == 200, answer.text
    waiter.join(10)
    assert not waiter.is_alive() and time.monotonic() - begun < 5  # the waiting call woke
    assert answer.json()["removed"]["approvals"] == 2
    assert pending_for(api, key) == []
    assert set(rows_of(gateway.home, key).values()) == {0}
    assert not (gateway.home / "workspace" / "a.txt").exists()
    assert not (gateway.home / "workspace" / "b.txt").exists()


def test_a_failed_purge_keeps_the_chat_and_a_retry_finishes(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(env={"HEARTH_FAIL_AT": "purge_folder"})
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="An answer."))
    api.wait(api.send(key, "a question")["run_id"])

    answer = api.http.delete(f"/api/sessions/{key}")

    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "session_not_deleted"
    assert "working folder" in error["message"] and "still kept" in error["message"]
    assert api.http.get(f"/api/sessions/{key}").status_code == 200  # still readable
    assert key in [s["key"] for s in api.http.get("/api/sessions").json()["sessions"]]
    assert rows_of(gateway.home, key)["sessions"] == 1
    failed = audit_rows(gateway.home)
    assert len(failed) == 1 and failed[0]["detail"]["outcome"] == "failed"
    assert "working folder" in failed[0]["detail"]["reason"]

    gateway.stop()
    gateway.extra_env = {}  # the folder can be removed again
    gateway.start()
    api = gateway.client()
    retried = api.http.delete(f"/api/sessions/{key}")
    assert retried.status_code == 200, retried.text
    assert api.http.get(f"/api/sessions/{key}").status_code == 404
    assert set(rows_of(gateway.home, key).values()) == {0}
    assert [r["detail"]["outcome"] for r in audit_rows(gateway.home)] == ["failed", "deleted"]


def test_patch_cannot_change_a_chats_memory_mode(gateway: Gateway) -> None:
    api = gateway.client()
    key = api.new_chat()
    for mode in ("incognito", "temporary"):
        answer = api.http.patch(f"/api/sessions/{key}", json={"memory_mode": mode})
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "memory_mode_fixed"
    both = api.http.patch(f"/api/sessions/{key}", json={"memory_mode": "incognito",
                                                        "title": "Renamed"})
    assert both.status_code == 409
    same = api.http.patch(f"/api/sessions/{key}", json={"memory_mode": "persistent",
                                                        "title": "Renamed"})
    assert same.status_code == 200 and same.json()["title"] == "Renamed"
    assert api.http.patch(f"/api/sessions/{key}",
                          json={"memory_mode": "persistent"}).status_code == 200
    assert api.http.patch(f"/api/sessions/{key}", json={"memory_mode": "bogus"}).status_code == 422
    assert api.http.patch("/api/sessions/nope", json={"memory_mode": "incognito"}
                          ).status_code == 404
    session = api.http.get(f"/api/sessions/{key}").json()["session"]
    assert session["memory_mode"] == "persistent" and session["title"] == "Renamed"


# ---------------------------------------------------------------- in process: memory


def memory_texts(engine: Any) -> dict[str, str | None]:
    def read(conn: Any) -> dict[str, str | None]:
        rows = conn.execute(memory_items.select().where(memory_items.c.kind == "fact"))
        return {row.text: row.filed_under for row in rows}

    found: dict[str, str | None] = blocking(lambda: engine.db.reading(read))
    return found


def test_memory_filed_under_the_chat_alone_goes_and_shared_memory_stays(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> None:
        await engine.start()
        try:
            key, other = new_chat(engine), new_chat(engine)
            model_server.push(Reply(text="Hello."))
            await turn(engine, key, "hi")
            def remember(words: str, under: str) -> None:
                engine.memory.remember(kind="fact", words=words, written_by="test",
                                       filed_under=under)

            await asyncio.to_thread(remember, "Owner keeps bees", key)
            await asyncio.to_thread(remember, "Owner likes tea", key)
            await asyncio.to_thread(remember, "Owner likes tea", other)
            await asyncio.to_thread(remember, "Owner rows boats", other)
            assert memory_texts(engine) == {"Owner keeps bees": key, "Owner likes tea": None,
                                            "Owner rows boats": other}
            report = await engine.delete_chat(key)
            assert report.deleted and report.removed["memory_items"] == 1
            assert report.removed["messages"] == 2 and report.removed["runs"] == 1
            assert memory_texts(engine) == {"Owner likes tea": None, "Owner rows boats": other}
            with pytest.raises(Refusal) as unknown:
                await engine.delete_chat(key)
            assert unknown.value.code == "session_not_found" and unknown.value.status == 404
            assert (await chats.get_chat(engine.db, other)).key == other
        finally:
            await engine.close()

    asyncio.run(body())


async def _chat_with_a_helper(engine: Engine, memory_mode: str) -> tuple[str, str]:
    """A chat in `memory_mode` and one helper it started (its task admitted, not yet run)."""
    parent = (await chats.open_chat(engine.db, memory_mode=memory_mode)).session.key
    batch = await engine.db.writing(helper_agents._start_in, parent, "run-asking", ["a task"],
                                    engine.config.limits)
    return parent, batch.started[0].key


def test_a_kept_chats_helpers_stay_and_a_helper_left_keeps_a_restricted_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> None:
        await engine.start()
        try:
            kept, its_helper = await _chat_with_a_helper(engine, "persistent")
            report = await engine.delete_chat(kept)
            assert report.deleted and report.removed["helpers"] == 0
            assert await engine.db.reading(session_store.exists, its_helper)  # a chat of its own

            parent, helper = await _chat_with_a_helper(engine, "incognito")
            engine.deleting.add(helper)  # as while its own deletion is under way
            with pytest.raises(Refusal) as kept_back:
                await engine.delete_chat(parent)
            assert kept_back.value.code == "session_not_deleted"
            assert "1 of its helpers' chats could not be removed" in kept_back.value.sentence
            assert await engine.db.reading(session_store.exists, parent)
            engine.deleting.discard(helper)
            report = await engine.delete_chat(parent)  # deleting again finishes both
            assert report.deleted and report.removed["helpers"] == 1
            assert not await engine.db.reading(session_store.exists, helper)
        finally:
            await engine.close()

    asyncio.run(body())


def test_a_chat_being_deleted_takes_no_new_message(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> None:
        await engine.start()
        try:
            key = new_chat(engine)
            engine.deleting.add(key)  # as while its deletion waits for a turn to end
            with pytest.raises(Refusal) as refused:
                await engine.send(key, "hello", principal=OWNER)
            assert refused.value.code == "session_deleting" and refused.value.status == 409
            with pytest.raises(Refusal) as twice:
                await engine.delete_chat(key)
            assert twice.value.code == "session_deleting"
            engine.deleting.discard(key)
            assert (await chats.get_chat(engine.db, key)).message_count == 0
            assert (await engine.delete_chat(key)).deleted
        finally:
            await engine.close()

    asyncio.run(body())


def test_the_failure_point_is_inert_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fail_point("purge_folder")  # nothing set: nothing happens
    monkeypatch.setenv("HEARTH_FAIL_AT", "something_else")
    fail_point("purge_folder")
    monkeypatch.setenv("HEARTH_FAIL_AT", "purge_folder")
    with pytest.raises(OSError):
        fail_point("purge_folder")
    with pytest.raises(ValueError):
        fail_point("no_such_point")
