"""What assembling a turn's context costs in CPU, with the hot context cache and without.

A store on disk holds one chat of `--turns` exchanges (a question and its answer each); then
`--builds` times a new exchange is appended (outside the measure) and the next turn's view is
built by `engine.turn.context.build` with the turn's compactor (a 128,000-token window, so
nothing is folded), as a turn builds it. CPU is `time.process_time()` (every thread of the
process: the store's reader included) around the builds only. Run once without a cache and
once with a `ContextCache`; printed: CPU per build each way and the ratio, and the views
compared equal.

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/context.py [--turns 150] [--builds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from sqlalchemy import Connection  # noqa: E402

from hearth.engine.turn import context  # noqa: E402
from hearth.engine.turn.compaction.fold import Budget, Compactor  # noqa: E402
from hearth.engine.turn.context_cache import ContextCache  # noqa: E402
from hearth.models.types import Message  # noqa: E402
from hearth.sessions import chats  # noqa: E402
from hearth.store import transcript  # noqa: E402
from hearth.store.db import Database  # noqa: E402
from hearth.store.runs import RunRow  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side, a metre apart."


def exchange(conn: Connection, key: str, n: int) -> int:
    """A question and its answer, as run `r<n>`; the question's seq."""
    asked = transcript.append(conn, key, "user", {"text": f"Question {n}: where does bed {n} "
                                                          "go, and what grows beside it?"},
                              run_id=f"r{n}")
    transcript.append(conn, key, "assistant", {"text": ANSWER}, run_id=f"r{n}")
    return asked.seq


def run_of(key: str, n: int, seq: int) -> RunRow:
    return RunRow(id=n, run_id=f"r{n}", session_key=key, tab_id="t", generation=0, kind="chat",
                  status="running", ending=None, sentence=None, recovery_attempts=0,
                  model=None, user_event_seq=seq, created_at=0.0, started_at=None,
                  ended_at=None, partial_text=None, ended_seq=None, principal="owner")


async def measure(turns: int, builds: int, cache: ContextCache | None
                  ) -> tuple[float, list[list[Message]]]:
    """CPU ms per build, and the views built."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.upgrade()
        key = (await chats.open_chat(db)).session.key
        for n in range(turns):
            await db.writing(exchange, key, n)

        async def announce(sentence: str, meta: dict[str, Any]) -> None:
            del sentence, meta

        compactor = Compactor(db=db, session_key=key, keeps=True, chain=[],
                              config_of=lambda _model: None,
                              budget=Budget.of(None, 80, 2000), announce=announce)
        spent, views = 0.0, []
        for n in range(turns, turns + builds):
            seq = await db.writing(exchange, key, n)
            began = time.process_time()
            views.append(await context.build(db, run_of(key, n, seq), system_prompt="You help.",
                                             history_messages=200, compactor=compactor,
                                             cache=cache))
            spent += time.process_time() - began
        db.close()
        return spent / builds * 1000, views


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--builds", type=int, default=200)
    args = parser.parse_args()
    cold, plain = asyncio.run(measure(args.turns, args.builds, None))
    cache = ContextCache()
    hot, cached = asyncio.run(measure(args.turns, args.builds, cache))
    print(f"context.build on a chat of {args.turns}-{args.turns + args.builds} turns, "
          f"{args.builds} builds, CPU over all threads:")
    print(f"  without the cache: {cold:.3f} ms per build")
    print(f"  with the cache:    {hot:.3f} ms per build ({cache.hits} hits, "
          f"{cache.misses} misses)")
    print(f"  ratio: {cold / hot:.1f}x less; the same views: {plain == cached}")


if __name__ == "__main__":
    main()
