"""Derived work keeps the principal of the work it derives from (invariant 13): a retry, a
regenerate and an edit that resends the same words run for whoever the repeated run ran for,
never for whoever pressed the door; an edit with new words is the sender's own message."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hearth.engine.runtime import Engine
from hearth.privacy import principal as principals
from hearth.store import runs as run_store
from tests.engine_harness import make_config, make_engine, new_chat
from tests.fakes.model_server import ScriptedModelServer

GUEST = principals.guest("telegram", "42")


async def _principal_of(engine: Engine, run_id: str) -> str:
    run = await engine.db.reading(run_store.get, run_id)
    assert run is not None
    return run.principal


async def _answered(engine: Engine, key: str, text: str) -> str:
    admitted = await engine.send(key, text, principal=GUEST)
    await engine.bus.wait_run(admitted.run_id, 15)
    return admitted.run_id


def test_the_doors_that_repeat_a_run_keep_its_principal(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    key = new_chat(engine)

    async def body() -> list[str]:
        await engine.start()
        try:
            first = await _answered(engine, key, "a guest's question")
            again = await engine.retry(first, None)  # pressed by the owner, on the dashboard
            await engine.bus.wait_run(again.run_id, 15)
            regenerated = await engine.regenerate(key, None, None)
            await engine.bus.wait_run(regenerated.run_id, 15)
            resent = await engine.edit(key, 0, "a guest's question", None,
                                       principal=principals.OWNER)
            await engine.bus.wait_run(resent.run_id, 15)
            edited = await engine.edit(key, 0, "the owner's own words", None,
                                       principal=principals.OWNER)
            await engine.bus.wait_run(edited.run_id, 15)
            return [await _principal_of(engine, run) for run in (
                first, again.run_id, regenerated.run_id, resent.run_id, edited.run_id)]
        finally:
            await engine.close()

    found = asyncio.run(body())
    assert found == ["guest:telegram:42"] * 4 + ["owner"]
