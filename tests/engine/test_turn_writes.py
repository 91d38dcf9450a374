"""What a plain answer costs the store, counted on the writer (`db.writer`: its jobs, and the
synced transactions among them). Admission is one write, synced (a promise: the message is on
disk before it is acknowledged); the turn after it is three, one of them synced: the claim
(the run marked running, the writer claim, the model chosen, the message's text read, in one
write), the answer, and the ending (a promise) with the row of the turn's model call. A run
that is not a helper's writes no report; an agent with no word limit reads nothing for one.
With the chores as they are by default: the chat's title comes after its first turn (not
counted), and learning only after `[learning] every_turns` turns, more than are counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import Connection, select

from hearth.engine.runtime import Engine
from hearth.models import guard
from hearth.privacy.principal import OWNER
from hearth.store.schema import model_calls
from tests.engine_harness import make_config, make_engine, new_chat, turn
from tests.fakes.model_server import ScriptedModelServer

TURNS = 3
ADMISSION = (1, 1)  # (writes, synced)
TURN = (3, 1)


async def _counted_turn(engine: Engine, key: str, text: str) -> tuple[tuple[int, int], ...]:
    """One plain turn: the (writes, synced) of its admission, and of the turn after it."""
    writer = engine.db.writer
    before = (writer.jobs, writer.synced)
    admitted = await engine.send(key, text, principal=OWNER)
    admitted_at = (writer.jobs, writer.synced)
    await engine.bus.wait_run(admitted.run_id, 15)
    await _quiet(engine)  # a row or chore written on its own would be counted too
    after = (writer.jobs, writer.synced)
    return ((admitted_at[0] - before[0], admitted_at[1] - before[1]),
            (after[0] - admitted_at[0], after[1] - admitted_at[1]))


async def _quiet(engine: Engine) -> None:
    """Until no chore runs and no call's row waits to be written on its own."""
    await engine.chores.settled()
    recorder = guard.recorder()
    if recorder is not None:
        await recorder.settled()


def _purposes(conn: Connection) -> list[str]:
    return [row.purpose for row in conn.execute(select(model_calls.c.purpose))]


def test_a_plain_answer_is_one_admission_and_three_writes_one_synced(tmp_path: Path) -> None:
    with ScriptedModelServer() as server:
        engine = make_engine(tmp_path, make_config(server.openai_base_url), tools=[])

        async def body() -> tuple[list[tuple[tuple[int, int], ...]], list[str]]:
            await engine.start()
            try:
                key = new_chat(engine)
                assert (await turn(engine, key, "hello"))["status"] == "complete"
                await _quiet(engine)  # its title
                counted = [await _counted_turn(engine, key, f"message {n}")
                           for n in range(TURNS)]
                return counted, await engine.db.reading(_purposes)
            finally:
                await engine.close()

        counted, purposes = asyncio.run(body())
    assert counted == [(ADMISSION, TURN)] * TURNS
    assert purposes.count("turn") == TURNS + 1  # each turn's call recorded, with its ending
