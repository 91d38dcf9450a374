"""Scheduled jobs: the store (due, advance, pause), the scheduler firing a job into its own
chat at most once per due time, and the `schedule_job` tool (made in a persistent chat, refused
before anyone is asked in Incognito, Temporary and unreadable chats). The jobs API is
tests/web/test_jobs_api.py's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from hearth.engine.background.job_tool import ScheduleJob
from hearth.engine.background.scheduler import Fired
from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.privacy import reach
from hearth.privacy.modes import Mode
from hearth.privacy.principal import OWNER
from hearth.privacy.scope import as_work_of
from hearth.sessions import chats
from hearth.store import jobs as job_store, sessions as session_store
from hearth.store.db import Database
from hearth.store.jobs import JobRow
from hearth.store.schema import approvals, audit, jobs, runs, sessions
from hearth.tools import fence
from hearth.tools.base import ToolContext, ToolRefused
from tests.engine_harness import blocking, events, make_config, make_engine
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

PROMPT = "Summarise the day's notes for me"  # must never reach an audit row
HEADER = "X-Hearth-Session"


def add(db: Database, *, next_at: float, every: int | None = None,
        prompt: str = PROMPT, made_by: str = "owner") -> JobRow:
    with db.write() as conn:
        return job_store.add(conn, prompt=prompt, next_at=next_at, every_seconds=every,
                             made_by=made_by, principal="owner")


def job_of(db: Database, job_id: int) -> JobRow:
    with db.read() as conn:
        job = job_store.get(conn, job_id)
    assert job is not None
    return job


def job_count(db: Database) -> int:
    with db.read() as conn:
        return len(conn.execute(select(jobs.c.id)).all())


# ---------------------------------------------------------------- the store


def test_a_job_is_named_after_its_id_and_ids_are_never_reused(db: Database) -> None:
    first = add(db, next_at=100.0)
    assert (first.session_key, first.enabled, first.once) == (f"job-{first.id}", True, True)
    with db.write() as conn:
        assert job_store.delete(conn, first.id)
        assert not job_store.delete(conn, first.id)
    second = add(db, next_at=100.0)
    assert second.id == first.id + 1 and second.session_key == f"job-{second.id}"


def test_due_lists_enabled_jobs_whose_time_has_come_oldest_first(db: Database) -> None:
    late = add(db, next_at=200.0)
    early = add(db, next_at=100.0, every=60)
    add(db, next_at=500.0)
    paused = add(db, next_at=50.0)
    with db.write() as conn:
        job_store.set_enabled(conn, paused.id, False, 0.0)
    with db.read() as conn:
        assert [j.id for j in job_store.due(conn, 99.0)] == []
        assert [j.id for j in job_store.due(conn, 200.0)] == [early.id, late.id]
        assert job_store.next_due_at(conn) == 100.0


def test_advance_disables_a_one_shot_and_moves_a_repeating_job_to_its_next_time(
        db: Database) -> None:
    once = add(db, next_at=100.0)
    every = add(db, next_at=100.0, every=60)
    with db.write() as conn:
        done = job_store.advance(conn, once.id, 101.0)
        moved = job_store.advance(conn, every.id, 101.0)
    assert done is not None and not done.enabled and done.last_fired_at == 101.0
    assert moved is not None and moved.enabled and moved.next_at == 160.0
    with db.read() as conn:
        assert job_store.due(conn, 1000.0) == [job_of(db, every.id)]


def test_advance_is_for_one_due_time_only(db: Database) -> None:
    every = add(db, next_at=100.0, every=60)
    with db.write() as conn:
        assert job_store.advance(conn, every.id, 101.0, due_at=100.0) is not None
        # a second tick that saw the same due time moves nothing on
        assert job_store.advance(conn, every.id, 101.5, due_at=100.0) is None
        once = job_store.add(conn, prompt="x", next_at=100.0, every_seconds=None, made_by="o",
                             principal="owner")
        assert job_store.advance(conn, once.id, 101.0) is not None
        assert job_store.advance(conn, once.id, 102.0) is None  # already done
        assert job_store.advance(conn, 999, 102.0) is None
    assert job_of(db, every.id).next_at == 160.0
    assert job_of(db, once.id).last_fired_at == 101.0


def test_a_job_that_missed_occurrences_fires_once_then_keeps_its_rhythm(db: Database) -> None:
    every = add(db, next_at=100.0, every=60)
    with db.write() as conn:
        moved = job_store.advance(conn, every.id, 100.0 + 60 * 10 + 5)  # down ten intervals
    assert moved is not None and moved.next_at == 100.0 + 60 * 11
    assert job_store.following(100.0, 60, 99.0) == 100.0
    assert job_store.following(100.0, 60, 100.0) == 160.0


def test_resuming_a_repeating_job_skips_what_it_missed(db: Database) -> None:
    every = add(db, next_at=100.0, every=60)
    with db.write() as conn:
        job_store.set_enabled(conn, every.id, False, 50.0)
        resumed = job_store.set_enabled(conn, every.id, True, 1000.0)
        assert job_store.set_enabled(conn, 999, True, 1000.0) is None
    assert resumed is not None and resumed.enabled and resumed.next_at == 1060.0


# ---------------------------------------------------------------- the scheduler


def engine_for(tmp_path: Path, server: ScriptedModelServer) -> Engine:
    return make_engine(tmp_path, make_config(server.openai_base_url))


def runs_of(engine: Engine, key: str) -> list[Any]:
    return blocking(lambda: engine.db.reading(lambda conn: conn.execute(
        select(runs).where(runs.c.session_key == key).order_by(runs.c.id)).all()))


async def ended(engine: Engine, run_id: str, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = await queries.run_status(engine.db, run_id)
        if view is not None and view["status"] not in ("admitted", "running"):
            return view
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


async def started(engine: Engine) -> None:
    """Start the engine without its scheduler's loop: the test drives the ticks. (Started and
    then stopped, the loop could tick first, and a stop that cut its tick mid-write let the
    test's tick see the job again.)"""
    engine.scheduler.start = lambda: None  # type: ignore[method-assign]
    try:
        await engine.start()
    finally:
        del engine.scheduler.start  # the class's own again, for a test that starts it


def test_the_running_gateway_fires_a_due_job_into_its_own_chat_and_its_turn_runs(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    model_server.push(Reply(text="Here is your summary."))
    job = add(engine.db, next_at=time.time() - 5)

    async def body() -> dict[str, Any]:
        await engine.start()  # the scheduler's own loop finds the job
        try:
            deadline = time.monotonic() + 10
            while not runs_of(engine, job.session_key) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            [run] = runs_of(engine, job.session_key)
            return await ended(engine, run.run_id)
        finally:
            await engine.close()

    view = asyncio.run(body())
    assert view["status"] == "complete", view
    with engine.db.read() as conn:
        chat = session_store.get(conn, job.session_key)
        [run] = conn.execute(select(runs).where(runs.c.session_key == job.session_key)).all()
    assert chat is not None
    assert (chat.memory_mode, chat.origin) == ("persistent", "job")
    assert run.kind == "job"
    said = [(e.kind, e.content.get("text")) for e in events(engine, job.session_key)]
    assert said[0] == ("user", PROMPT)
    assert ("assistant", "Here is your summary.") in said
    assert events(engine, job.session_key)[0].idempotency_key == \
        f"job:{job.id}:{int(job.next_at)}"
    fired = job_of(engine.db, job.id)
    assert not fired.enabled and fired.last_fired_at is not None  # a one-shot is done


def test_a_job_fires_once_per_due_time_however_often_the_scheduler_ticks(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    due_at = float(int(time.time()) - 30)
    job = add(engine.db, next_at=due_at, every=3600)

    async def body() -> list[list[Fired]]:
        await started(engine)
        try:
            together = await asyncio.gather(engine.scheduler.tick(), engine.scheduler.tick())
            # a crash after the admission but before the job moved on: it is due again
            await engine.db.writing(lambda conn: conn.execute(
                update(jobs).where(jobs.c.id == job.id).values(next_at=due_at)))
            again = await engine.scheduler.tick()
            for run in runs_of(engine, job.session_key):
                await ended(engine, run.run_id)
            return [*together, again]
        finally:
            await engine.close()

    first, second, again = asyncio.run(body())
    fired = [f for f in first + second if f.run_id is not None]
    assert len(fired) == 1 and not fired[0].duplicate
    assert [(f.run_id, f.duplicate) for f in again] == [(fired[0].run_id, True)]
    assert len(runs_of(engine, job.session_key)) == 1
    users = [e for e in events(engine, job.session_key) if e.kind == "user"]
    assert len(users) == 1
    assert job_of(engine.db, job.id).next_at == due_at + 3600


def test_a_job_whose_chat_was_deleted_makes_it_again(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    job = add(engine.db, next_at=time.time() - 5, every=60)

    async def body() -> tuple[list[Fired], list[Fired]]:
        await started(engine)
        try:
            first = await engine.scheduler.tick()
            await ended(engine, first[0].run_id or "")
            report = await engine.delete_chat(job.session_key)
            assert report.deleted
            second = await engine.scheduler.tick(at=time.time() + 120)
            await ended(engine, second[0].run_id or "")
            return first, second
        finally:
            await engine.close()

    first, second = asyncio.run(body())
    assert first[0].run_id and second[0].run_id and first[0].run_id != second[0].run_id
    with engine.db.read() as conn:
        chat = session_store.get(conn, job.session_key)
    assert chat is not None and chat.origin == "job"
    assert [e.content.get("text") for e in events(engine, job.session_key)
            if e.kind == "user"] == [PROMPT]


def test_a_job_whose_name_a_restricted_chat_holds_is_skipped_not_fired_there(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    job = add(engine.db, next_at=time.time() - 5)
    blocking(lambda: chats.open_chat(engine.db, name=job.session_key, memory_mode="incognito"))

    async def body() -> list[Fired]:
        await started(engine)
        try:
            return await engine.scheduler.tick()
        finally:
            await engine.close()

    assert [f.run_id for f in asyncio.run(body())] == [None]
    assert runs_of(engine, job.session_key) == []
    assert not job_of(engine.db, job.id).enabled
    with engine.db.read() as conn:
        [row] = conn.execute(select(audit).where(audit.c.action == "job.skipped")).all()
    assert row.detail["reason"] == "memory_mode_fixed" and PROMPT not in str(row.detail)


def test_the_scheduler_runs_as_nobodys_work(tmp_path: Path,
                                             model_server: ScriptedModelServer) -> None:
    """Started from inside a chat's work scope, its loop still has none."""
    engine = engine_for(tmp_path, model_server)
    seen: list[object] = []

    async def body() -> None:
        await started(engine)
        with as_work_of("someone", "incognito"):
            engine.scheduler.start()
        original = engine.scheduler._due

        def spy(at: float) -> list[JobRow]:
            seen.append(reach.restricted_mode())
            return original(at)

        engine.scheduler._due = spy  # type: ignore[method-assign]
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await engine.close()

    asyncio.run(body())
    assert seen and all(mode is None for mode in seen)


# ---------------------------------------------------------------- the schedule_job tool


def make_chat(engine: Engine, mode: str, trust: str) -> str:
    recorded = "persistent" if mode == "unreadable" else mode
    key = blocking(lambda: chats.open_chat(engine.db, memory_mode=recorded,
                                           trust=trust)).session.key
    if mode == "unreadable":  # a mode this build does not know
        blocking(lambda: engine.db.writing(lambda conn: conn.execute(
            update(sessions).where(sessions.c.key == key).values(memory_mode="from-the-future"))))
    return key


def tool_turn(engine: Engine, server: ScriptedModelServer, mode: str, trust: str,
              arguments: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """One turn in a new chat that calls schedule_job: the chat, the run, the tool result."""
    server.push(Reply(tool_calls=[Call("schedule_job", arguments, id="c1")]),
                Reply(text="Done."))

    async def body() -> tuple[str, dict[str, Any], dict[str, Any]]:
        await started(engine)
        try:
            key = make_chat(engine, mode, trust)
            admitted = await engine.send(key, "Remind me every hour, please.", principal=OWNER)
            view = await ended(engine, admitted.run_id)
            [result] = [e for e in events(engine, key) if e.kind == "tool_result"]
            return key, view, {**result.content, **result.meta}
        finally:
            await engine.close()

    outcome: tuple[str, dict[str, Any], dict[str, Any]] = asyncio.run(body())
    return outcome


def test_the_tool_makes_a_job_in_a_persistent_trusted_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    key, view, result = tool_turn(engine, model_server, "persistent", "trusted",
                                  {"prompt": PROMPT, "every_minutes": 60})
    assert view["status"] == "complete", view
    with engine.db.read() as conn:
        [job] = job_store.list_all(conn)
    assert (job.prompt, job.every_seconds, job.made_by) == (PROMPT, 3600, key)
    assert abs(job.next_at - (time.time() + 3600)) < 60
    assert result["receipt"].startswith(f"Scheduled job #{job.id}: every 60 min, next at ")
    assert not result["is_error"]
    with engine.db.read() as conn:
        made = conn.execute(select(audit).where(audit.c.action == "job.created")).all()
    assert len(made) == 1 and PROMPT not in str(made[0].detail)


def test_the_tool_in_a_persistent_chat_that_asks_first_asks_the_owner(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """The positive control for 'no approval asked' below: this chat is asked."""
    engine = engine_for(tmp_path, model_server)
    model_server.push(Reply(tool_calls=[Call("schedule_job", {"prompt": PROMPT,
                                                              "in_minutes": 5}, id="c1")]),
                      Reply(text="Done."))

    async def body() -> dict[str, Any]:
        await started(engine)
        try:
            key = make_chat(engine, "persistent", "ask")
            admitted = await engine.send(key, "Remind me in five minutes.", principal=OWNER)
            deadline = time.monotonic() + 10
            asked: list[Any] = []
            while not asked and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                asked = await engine.db.reading(
                    lambda conn: conn.execute(select(approvals)).all())
            assert [a.tool for a in asked] == ["schedule_job"]
            await engine.desk.decide(asked[0].id, "allow_once", None)
            return await ended(engine, admitted.run_id)
        finally:
            await engine.close()

    assert asyncio.run(body())["status"] == "complete"
    assert job_count(engine.db) == 1
    assert job_of(engine.db, 1).every_seconds is None


@pytest.mark.parametrize("mode", ["incognito", "temporary", "unreadable"])
def test_the_tool_is_refused_in_a_restricted_chat_before_anyone_is_asked(
        mode: str, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = engine_for(tmp_path, model_server)
    key, view, result = tool_turn(engine, model_server, mode, "ask",
                                  {"prompt": PROMPT, "every_minutes": 60})
    assert view["status"] == "complete", view
    sentence = reach.lasting_refusal("a scheduled job", Mode(mode))
    assert sentence is not None and "Do it from an ordinary chat." in sentence
    assert result["output"] == sentence
    assert job_count(engine.db) == 0
    with engine.db.read() as conn:
        assert conn.execute(select(approvals)).all() == []
        refused = conn.execute(select(audit).where(audit.c.action == "tool.refused")).all()
    assert [(r.actor, r.detail["tool"]) for r in refused] == [("privacy", "schedule_job")]
    assert all(PROMPT not in str(r.detail) for r in refused)
    assert key  # the chat existed while its turn ran


@pytest.mark.parametrize("mode", ["incognito", "temporary", "from-the-future"])
def test_the_fence_and_the_tool_itself_refuse_restricted_work(mode: str, db: Database,
                                                             ctx: ToolContext) -> None:
    tool = ScheduleJob(db)
    args = {"prompt": PROMPT, "in_minutes": 5}
    with as_work_of("chat-1", mode):
        said = fence.refusal(tool, args, ctx)
        assert said == reach.lasting_refusal("a scheduled job")
        with pytest.raises(ToolRefused) as refused:
            asyncio.run(tool.run(args, ctx))
    assert refused.value.sentence == said
    assert job_count(db) == 0
    with as_work_of("chat-1", "persistent"):
        assert fence.refusal(tool, args, ctx) is None


@pytest.mark.parametrize(("args", "words"), [
    ({"prompt": PROMPT}, "exactly one"),
    ({"prompt": PROMPT, "in_minutes": 5, "every_minutes": 5}, "exactly one"),
    ({"prompt": PROMPT, "in_minutes": 0}, "1 to 525,600"),
    ({"prompt": PROMPT, "every_minutes": 525_601}, "1 to 525,600"),
    ({"prompt": PROMPT, "every_minutes": True}, "1 to 525,600"),
    ({"prompt": "   ", "in_minutes": 5}, "prompt"),
    ({"prompt": "x" * 8001, "in_minutes": 5}, "prompt"),
])
def test_the_tool_refuses_a_schedule_it_cannot_keep(args: dict[str, Any], words: str,
                                                    db: Database, ctx: ToolContext) -> None:
    with pytest.raises(ToolRefused) as refused:
        asyncio.run(ScheduleJob(db).run(args, ctx))
    assert words in refused.value.sentence and "no job was made" in refused.value.sentence
    assert job_count(db) == 0


def test_a_one_shot_receipt_says_when(db: Database, ctx: ToolContext) -> None:
    outcome = asyncio.run(ScheduleJob(db).run({"prompt": PROMPT, "in_minutes": 90}, ctx))
    assert outcome.receipt.startswith("Scheduled job #1: once, at ")
    assert job_of(db, 1).made_by == "k"
