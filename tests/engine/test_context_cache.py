"""The hot context cache (engine/turn/context_cache.py): a turn of a kept chat reads what was
written since its last one, and what the model reads is what the transcript shows, after every
door that moves the chat's head or rewrites what the model reads.

Each turn's first request, as the scripted server received it, is compared with the chat's view
built fresh from the store at that moment, with no cache (`FreshViews`, the server's
responder); a chat with branches, compaction and steering is run with and without the cache and
the requests compared byte for byte; a restricted chat leaves nothing in it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, select

from hearth.config import Config
from hearth.engine.background import idle_summaries
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.engine.turn import context
from hearth.engine.turn.context_cache import ContextCache, Read, Recent
from hearth.models.openai_compat import to_wire
from hearth.privacy.principal import OWNER
from hearth.store.heads import Stamp
from hearth.store.runs import RunRow
from hearth.store.schema import runs
from tests.engine_harness import blocking, events, make_engine, run, turn
from tests.fakes.model_server import Call, Recorded, Reply, ScriptedModelServer
from tests.support.compaction import OUTPUT, WINDOW, answer, ask
from tests.support.tools import Echo


def config_for(url: str, window: int = 128_000) -> Config:
    """The chat model `fake` (its window `window`) and a background chain for summaries."""
    models = [{"id": "fake", "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": "fake-model", "context_window": window, "max_output_tokens": OUTPUT},
              {"id": "bg", "provider": "openai", "base_url": url, "api_key": "sk-test",
               "model": "bg-model"}]
    return Config.model_validate({
        "tools": {"profile": "full", "allow": ["echo"]}, "models": models,
        "chains": {"chat": ["fake"], "background": ["bg"]}})


def engine_on(tmp_path: Path, config: Config, cache: ContextCache | None = None) -> Engine:
    engine = make_engine(tmp_path, config, [Echo()])
    engine.deps = replace(engine.deps, snapshot=Snapshot.first(config, {}),
                          context=cache if cache is not None else ContextCache())
    return engine


def _running(conn: Connection) -> RunRow | None:
    row = conn.execute(select(runs).where(runs.c.status == "running")).first()
    return RunRow.of(row) if row else None


class FreshViews:
    """The server's responder: at each run's first request, the chat's view built fresh from the
    store (no cache) beside what was sent, as the wire carries both."""

    def __init__(self, engine: Engine, server: ScriptedModelServer) -> None:
        self.engine = engine
        self.pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        self.seen: set[str] = set()
        server.responder = self

    def __call__(self, recorded: Recorded) -> Reply | None:
        if recorded.chore is not None or recorded.model != "fake-model":
            return None
        db = self.engine.db
        running = blocking(lambda: db.reading(_running))
        if running is None or running.run_id in self.seen:
            return None  # a later step of the turn: the loop's own messages, not a view
        self.seen.add(running.run_id)
        limit = self.engine.config.limits.history_messages
        fresh = blocking(lambda: context.build(db, running, system_prompt=recorded.system,
                                               history_messages=limit))
        self.pairs.append((recorded.messages, [to_wire(m) for m in fresh]))
        return None

    def assert_all_equal(self) -> None:
        assert self.pairs
        for sent, fresh in self.pairs:
            assert sent == fresh


async def _ran(engine: Engine, admitted: Any) -> None:
    await engine.bus.wait_run(admitted.run_id, 15)


async def _chat(engine: Engine, turns: int, name: str | None = None) -> str:
    key = (await engine.chats.open(name=name, trust="trusted")).session.key
    for n in range(1, turns + 1):
        await turn(engine, key, ask(n))
    return key


# ------------------------------------------------------------------------ the doors, one each

Door = Callable[[Engine, str, ScriptedModelServer], Awaitable[str]]


async def _regenerate(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    await _ran(engine, await engine.regenerate(key, 5, None))  # the third answer again
    return key


async def _edit(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    await _ran(engine, await engine.edit(key, 2, "An edited question.", None, principal=OWNER))
    return key


async def _rewind(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    await engine.rewind(key, 1, None)  # back to an answer: nothing runs
    return key


async def _choose_variant(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    await _ran(engine, await engine.regenerate(key, 5, None))
    await turn(engine, key, "On the new branch.")
    await engine.choose_variant(key, 5, 0)  # the third answer's first, and its branch, back
    return key


async def _retry(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    server.push(Reply(status=400, error_body={"error": {"message": "bad request"}}))
    failed = await turn(engine, key, "This one fails.")
    assert failed["status"] == "error", failed
    await _ran(engine, await engine.retry(failed["run_id"], None))
    return key


async def _stop(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    held = threading.Event()
    started = threading.Event()
    server.push(Reply(text="never sent", hold=held, started=started))
    admitted = await engine.send(key, "Stop me.", principal=OWNER)
    waited = asyncio.ensure_future(_ran(engine, admitted))
    await asyncio.to_thread(started.wait, 10)
    await engine.stop(key)
    held.set()
    await waited
    return key


async def _steer(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    held, started = threading.Event(), threading.Event()
    server.push(Reply(text="Let me look.", tool_calls=[Call("echo", {"words": "hi"}, "look")],
                      hold=held, started=started), Reply(text="Looked."))
    admitted = await engine.send(key, "Look something up.", principal=OWNER)
    waited = asyncio.ensure_future(_ran(engine, admitted))
    await asyncio.to_thread(started.wait, 10)
    steered = await engine.send(key, "And mind the frost.", principal=OWNER)
    assert steered.status == "steered"
    held.set()
    await waited
    return key


async def _compact_now(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    done = await engine.chats.compact(key)
    assert done.compacted
    return key


async def _idle_summary(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    with pytest.MonkeyPatch.context() as patch:  # a short chat's idle summary folds something
        patch.setattr(idle_summaries, "KEEP_TOKENS", 300)
        assert await idle_summaries.sweep(engine.deps, idle_seconds=0, unsummarized=4) == 1
    return key


async def _fork(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    return (await engine.fork(key, 3, None)).key


async def _import(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    exported = await engine.chats.export(key, "jsonl")
    done = await engine.chats.import_file(engine.choices(), exported.body)
    return done.imported[0].key


async def _delete_and_reopen(engine: Engine, key: str, server: ScriptedModelServer) -> str:
    await engine.delete_chat(key)
    assert key not in engine.deps.context  # nothing of it stays
    reopened = await engine.chats.open(name="garden", trust="trusted")
    assert reopened.session.key == key  # the same key, a new chat
    await turn(engine, key, "A new beginning.")
    return key


DOORS: dict[str, Door] = {
    "regenerate": _regenerate, "edit": _edit, "rewind": _rewind,
    "choose_variant": _choose_variant, "retry": _retry, "stop": _stop, "steer": _steer,
    "compact_now": _compact_now, "idle_summary": _idle_summary, "fork": _fork,
    "import": _import, "delete_and_reopen": _delete_and_reopen,
}


@pytest.mark.parametrize("door", list(DOORS))
def test_after_each_door_the_next_turn_reads_what_the_transcript_shows(
        door: str, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, config_for(model_server.openai_base_url, window=WINDOW))
    views = FreshViews(engine, model_server)

    async def body() -> tuple[int, int]:
        await engine.start()
        try:
            key = await _chat(engine, 6, name="garden")
            hits = engine.deps.context.hits
            key = await DOORS[door](engine, key, model_server)
            await turn(engine, key, "And after that?")
            await turn(engine, key, "And then?")
            return hits, engine.deps.context.hits
        finally:
            await engine.close()

    hits_before, hits_after = run(body())
    views.assert_all_equal()
    assert hits_before >= 3  # the chat's turns after its first read from the cache
    assert hits_after > hits_before  # and it is used again after the door


def test_after_an_in_turn_compaction_the_next_turn_reads_the_summary(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, config_for(model_server.openai_base_url, window=WINDOW))
    views = FreshViews(engine, model_server)

    async def body() -> list[str]:
        await engine.start()
        try:
            key = await _chat(engine, 30)
            return [str(e.content.get("text")) for e in events(engine, key)
                    if e.kind == "notice"]
        finally:
            await engine.close()

    said = run(body())
    assert sum(n.startswith("Conversation compacted") for n in said) >= 1
    views.assert_all_equal()
    assert engine.deps.context.hits > 0


# -------------------------------------------------------------- with and without, byte for byte

def _story(tmp_path: Path, server: ScriptedModelServer, cache: ContextCache) -> list[str]:
    """A chat with branches, compactions (in the turn and asked for) and a steer; each turn
    request's messages as sent."""
    server.reset()
    server.default = Reply(text=answer(0))
    tmp_path.mkdir()
    engine = engine_on(tmp_path, config_for(server.openai_base_url, window=WINDOW), cache)

    async def body() -> None:
        await engine.start()
        try:
            key = await _chat(engine, 10)
            await _ran(engine, await engine.regenerate(key, None, None))
            await _steer(engine, key, server)
            await _edit(engine, key, server)
            for n in range(11, 17):
                await turn(engine, key, ask(n))
            await _compact_now(engine, key, server)
            await turn(engine, key, ask(17))
            await engine.choose_variant(key, 2, 0)  # the message before its edit, its branch
            for n in range(18, 22):
                await turn(engine, key, ask(n))
        finally:
            await engine.close()

    run(body())
    return [json.dumps(r.messages) for r in server.requests
            if r.model == "fake-model" and r.chore is None]


def test_the_model_reads_the_same_with_the_cache_and_without(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    cached = ContextCache()
    with_cache = _story(tmp_path / "with", model_server, cached)
    without = _story(tmp_path / "without", model_server, ContextCache(chats=0))
    assert len(with_cache) > 20
    assert with_cache == without
    assert cached.hits > 10


# ------------------------------------------------------------------------------ privacy, bounds

@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_a_restricted_chat_leaves_nothing_in_the_cache(
        mode: str, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text=answer(0))
    engine = engine_on(tmp_path, config_for(model_server.openai_base_url))

    async def body() -> tuple[list[str], int]:
        await engine.start()
        try:
            await _chat(engine, 2)
            key = (await engine.chats.open(memory_mode=mode, trust="trusted")).session.key
            for n in range(3):
                await turn(engine, key, ask(n))
            return engine.deps.context.keys(), engine.deps.context.hits + \
                engine.deps.context.misses
        finally:
            await engine.close()

    held, looked = run(body())
    assert len(held) == 1  # the kept chat's, and nothing of the restricted one
    assert looked == 2  # only the kept chat's two turns asked the cache


def _recent(chars: int, seq: int = 1) -> Recent:
    stamp = Stamp(0, "t", None, seq, seq, 0, seq)
    return Recent(stamp, 200, None, Read([], [], False), chars=chars)


def test_the_cache_holds_at_most_its_chats_and_characters() -> None:
    cache = ContextCache(chats=2, chars=1000, chat_chars=600)
    cache.put("a", _recent(100))
    cache.put("b", _recent(100))
    assert cache.get("a") is not None  # a lookup does not reorder; a put does
    cache.put("c", _recent(100))
    assert cache.keys() == ["b", "c"]  # the least recently kept went first
    cache.put("d", _recent(700))  # longer than one chat may be: not kept
    assert cache.keys() == ["b", "c"]
    cache.put("b", _recent(550))
    cache.put("e", _recent(500))  # 550 + 500 > 1000: the oldest goes
    assert cache.keys() == ["e"]
    assert cache.held_chars() <= 1000
    cache.drop("e")
    assert len(cache) == 0
