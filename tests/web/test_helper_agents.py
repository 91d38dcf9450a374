"""Helpers (`spawn_helpers`, `engine.background.helper_agents`): a chat hands tasks to chats of
their own that work in the background; work that ran reports back as a message that starts the
parent's next turn after the asking one; a helper the owner stopped starts none, and the parent's
model is told how it ended; a batch past the limit starts what fits; depth is limited; a declined
start starts nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from hearth.engine.background import helper_agents
from hearth.engine.turn import endings
from hearth.engine.turn.context import HELPER_FENCE
from hearth.sessions import chats
from hearth.store import runs as run_store, transcript
from tests.engine_harness import make_config, make_engine
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.approvals import pending_approvals
from tests.support.polling import until


def _spawn(*tasks: str) -> Reply:
    return Reply(tool_calls=[Call("spawn_helpers", {"tasks": list(tasks)})])


def _helpers(api: Api, key: str) -> list[dict[str, Any]]:
    return list(api.http.get(f"/api/sessions/{key}").json()["helpers"])


def test_a_helpers_report_starts_the_parents_next_turn(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.push(_spawn("count to three"))
    model_server.default = Reply(text="done")
    api = gateway_factory().client()
    key = api.new_chat()
    asked = api.send(key, "get a helper to count")
    api.wait(asked["run_id"])
    [helper] = until(lambda: _helpers(api, key), 20)
    assert helper["title"] == "Helper: count to three"
    report = until(lambda: [m for m in api.messages(key) if "helper_report" in m["meta"]], 20)[0]
    assert report["text"].startswith(f"Report from helper {helper['key']}")
    assert report["run_id"] != asked["run_id"]
    api.wait(report["run_id"])
    # the report may be written while the asking turn still answers (the helper can finish
    # first); its own turn starts after the asking turn ended, as the chat's lane orders them
    asking, reported = (api.http.get(f"/api/runs/{run}").json()
                        for run in (asked["run_id"], report["run_id"]))
    assert datetime.fromisoformat(reported["started_at"]) >= datetime.fromisoformat(
        asking["ended_at"])
    reading = [r for r in model_server.requests if HELPER_FENCE in str(r.messages)]
    assert len(reading) == 1, "the report's turn did not read it, fenced"
    helper_chat = api.http.get(f"/api/sessions/{helper['key']}").json()
    assert helper_chat["messages"][0]["text"] == "count to three"
    assert helper_chat["messages"][0]["meta"]["helper_of"]["session"] == key


def test_a_helper_the_owner_stopped_starts_no_turn_and_the_parent_is_told(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    release = threading.Event()
    model_server.push(_spawn("a long task"))
    model_server.default = Reply(text="ok", hold=release)  # the chat's turn and the helper's
    api = gateway_factory().client()
    key = api.new_chat()
    asked = api.send(key, "start a long helper")["run_id"]
    until(lambda: any(h["working"] for h in _helpers(api, key)), 20)
    stopped = api.http.post(f"/api/sessions/{key}/stop", json={"helpers": True}).json()
    assert stopped["stopped"] == asked and len(stopped["helpers_stopped"]) == 1
    release.set()
    note = until(lambda: [m for m in api.messages(key) if m["kind"] == "notice"
                          and "helper_report" in m["meta"]], 20)[0]
    assert "did not do its work" in note["text"] and note["run_id"] is None
    time.sleep(0.5)
    runs = {m["run_id"] for m in api.messages(key) if m["run_id"]}
    assert len(runs) == 1, "a stopped helper started a turn"
    api.wait(api.send(key, "and now?")["run_id"])
    assert "[Hearth: Helper" in str(model_server.requests[-1].messages)


def test_a_batch_past_the_limit_starts_what_fits(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    hold = threading.Event()
    model_server.push(_spawn("one", "two", "three"), Reply(text="ok"))
    model_server.default = Reply(text="working", hold=hold)
    api = gateway_factory(config="[limits]\nhelpers_running = 2\n").client()
    key = api.new_chat()
    run = api.send(key, "three tasks")["run_id"]
    result = until(lambda: [m for m in api.messages(key) if m["kind"] == "tool_result"], 20)[0]
    assert "Not started (2 may work at once): three" in result["content"]["output"]
    hold.set()
    api.wait(run)
    assert [h["title"] for h in _helpers(api, key)] == ["Helper: one", "Helper: two"]


def test_a_declined_start_starts_nothing(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.push(_spawn("anything"), Reply(text="fine, not then"))
    api = gateway_factory().client()
    key = api.new_chat(trust="ask")
    run = api.send(key, "start a helper")["run_id"]
    [waiting] = pending_approvals(api, timeout=20)
    assert waiting["tool"] == "spawn_helpers"
    api.http.post(f"/api/approvals/{waiting['id']}", json={"decision": "deny"})
    api.wait(run)
    assert _helpers(api, key) == []


def test_helpers_may_not_nest_past_the_depth(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.push(_spawn("go deeper"))
    model_server.default = Reply(text="done")
    api = gateway_factory(config="[limits]\nhelper_depth = 1\n").client()
    key = api.new_chat()
    api.wait(api.send(key, "delegate")["run_id"])
    [helper] = until(lambda: _helpers(api, key), 20)
    assert api.http.patch(f"/api/sessions/{helper['key']}",
                          json={"trust": "trusted"}).status_code == 200
    report = until(lambda: [m for m in api.messages(key) if "helper_report" in m["meta"]], 20)[0]
    api.wait(report["run_id"])  # the report's turn took its reply: the queue is ours now
    model_server.push(_spawn("deeper still"), Reply(text="ok"))
    api.wait(api.send(helper["key"], "start one more")["run_id"])
    [result] = [m for m in api.messages(helper["key"]) if m["kind"] == "tool_result"]
    assert "only 1 level(s) deep" in result["content"]["output"]
    assert _helpers(api, helper["key"]) == []


def test_a_helper_that_failed_still_reports(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.push(_spawn("fetch the numbers"))
    model_server.default = Reply(status=500)  # every model call after the spawn fails
    api = gateway_factory().client()
    key = api.new_chat()
    api.send(key, "delegate")
    report = until(lambda: [m for m in api.messages(key)
                            if m["kind"] == "user" and "helper_report" in m["meta"]], 20)[0]
    assert report["meta"]["helper_report"]["ending"] not in ("complete", "stopped")
    assert report["text"].startswith("Report from helper")


def test_a_report_a_crash_left_unsent_is_sent_at_the_next_start(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="ok")
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> list[str]:
        parent = (await chats.open_chat(engine.db, trust="trusted")).session.key
        batch = await engine.db.writing(helper_agents._start_in, parent, "run-asking", ["a task"],
                                        engine.config.limits)
        [started] = batch.started
        await engine.db.writing(run_store.mark_running, started.run_id)
        await endings.settle(engine.db, engine.bus, session_key=started.key,
                             run_id=started.run_id, ending=endings.complete())  # no one heard
        await engine.start()
        try:
            window = await engine.db.reading(transcript.window, parent, 100)
            return [e.content.get("text", "") for e in window if "helper_report" in e.meta]
        finally:
            await engine.close()

    reported = asyncio.run(body())
    assert len(reported) == 1 and reported[0].startswith("Report from helper")


def test_a_helper_a_crash_left_waiting_reports_when_it_ends_after_the_next_start(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Only the runs the engine knows for helpers' are reported: one a previous process
    admitted is known from the store at start, before it runs."""
    model_server.default = Reply(text="counted")
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))

    async def body() -> list[str]:
        parent = (await chats.open_chat(engine.db, trust="trusted")).session.key
        await engine.db.writing(helper_agents._start_in, parent, "run-asking", ["a task"],
                                engine.config.limits)  # admitted; that process died
        await engine.start()
        try:
            for _ in range(200):
                window = await engine.db.reading(transcript.window, parent, 100)
                said = [str(e.content.get("text", "")) for e in window
                        if "helper_report" in e.meta]
                if said:
                    return said
                await asyncio.sleep(0.05)
            return []
        finally:
            await engine.close()

    reported = asyncio.run(body())
    assert len(reported) == 1 and reported[0].startswith("Report from helper")
    assert "counted" in reported[0]


def test_a_restricted_chats_helper_is_titled_by_its_mode_never_its_task() -> None:
    """Failed before: an Incognito or Temporary chat's helper was titled with its task's
    words, shown in lists and kept in the title column."""
    task = "find the quokkaxylophonz receipts"
    assert helper_agents.helper_title("persistent", task) == f"Helper: {task}"
    for mode in ("incognito", "temporary", "something unreadable"):
        title = helper_agents.helper_title(mode, task)
        assert "quokka" not in title and title.endswith("helper"), title
    assert helper_agents.helper_title("incognito", task) == "Incognito chat: helper"
