"""What one plain turn costs inside the engine: store writes, synced commits and CPU.

The engine is built without HTTP (`tests/engine_harness.py`) on a private store, against the
scripted model server answering at once; `--turns` turns run one after another in one chat,
after a first turn whose title chore is left out. Per turn it prints the writer's jobs (store
writes, admission included), its transactions, the synced ones among them (`db.writer`), and
the process's CPU (`time.process_time()`: every thread, the scripted server's included), for
three settings of learning: after every turn (`[learning] every_turns = 1`, as it ran before),
the default (every 20 turns or when the chat goes idle), and none in the run. Targets (issue
30): at most 3 writes and 1 sync for the turn after admission's own (so 4 and 2 with it).

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/turn_cost.py [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
sys.path[len(sys.path):] = [str(ROOT / "src")]

from hearth.models import guard  # noqa: E402
from tests.engine_harness import make_config, make_engine, new_chat, turn  # noqa: E402
from tests.fakes.model_server import ScriptedModelServer  # noqa: E402

TARGET_WRITES, TARGET_SYNCED = 4, 2  # a turn with its admission
SETTINGS = (("learning after every turn", 1), ("learning every 20 turns (default)", 20),
            ("no learning in the run", 1_000_000))


async def measure(turns: int, every: int) -> dict[str, float]:
    """Run `turns` turns in one chat with learning every `every` turns; figures per turn."""
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        config = make_config(server.openai_base_url,
                             learning={"every_turns": every, "idle_seconds": 3600})
        engine = make_engine(Path(tmp), config, tools=[])
        await engine.start()
        try:
            key = new_chat(engine)
            await turn(engine, key, "warm up")
            await _quiet(engine)
            writer = engine.db.writer
            jobs, batches, synced = writer.jobs, writer.batches, writer.synced
            began = time.process_time()
            for n in range(turns):
                await turn(engine, key, f"message {n}")
            await _quiet(engine)
            cpu = time.process_time() - began
            return {"writes": (writer.jobs - jobs) / turns,
                    "transactions": (writer.batches - batches) / turns,
                    "synced": (writer.synced - synced) / turns, "cpu_ms": cpu * 1000 / turns,
                    "chore_calls": len(server.calls(chores=True))}
        finally:
            await engine.close()


async def _quiet(engine: object) -> None:
    await engine.chores.settled()  # type: ignore[attr-defined]
    recorder = guard.recorder()
    if recorder is not None:
        await recorder.settled()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.turns} plain turns in one chat, per turn (admission included):")
    for name, every in SETTINGS:
        got = asyncio.run(measure(args.turns, every))
        met = got["writes"] <= TARGET_WRITES and got["synced"] <= TARGET_SYNCED
        print(f"  {name:36} writes {got['writes']:.2f} (transactions "
              f"{got['transactions']:.2f}), synced {got['synced']:.2f}, CPU "
              f"{got['cpu_ms']:.2f} ms, chore calls {got['chore_calls']:.0f}"
              f"  [{'target met' if met else 'target missed'}: <= {TARGET_WRITES} writes, "
              f"<= {TARGET_SYNCED} synced]")


if __name__ == "__main__":
    main()
