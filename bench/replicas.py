"""Turns per second and admission latency: one gateway on SQLite, one and two on PostgreSQL.

Each configuration runs real `hearth gateway` subprocesses (tests.gateway.Gateway) against the
same scripted model (tests.fakes.model_server, a short answer), and drives `--chats` chats at
once, each a closed loop of `--turns` messages: send, wait for the run's end, send the next.
With two gateways the chats' messages go to both in turn (a chat's messages alternate between
them), so the figures include the cross-gateway claim, the lease and the relayed live frames.
Admission is the client-observed time from sending a message to holding its 202.

PostgreSQL runs on the tests' throwaway cluster (tests/support/postgres.py), which has fsync
and synchronous_commit off: its figures leave out the disk's sync that SQLite's (FULL) pay.
The load generator shares the machine's cores with the gateways.

A benchmark, not a test: it prints figures and ratios and exits 0 whatever they are.

    .venv/bin/python bench/replicas.py [--chats 8] [--turns 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Api, Gateway, write_config  # noqa: E402
from tests.support import postgres  # noqa: E402


def start(folder: Path, model: ScriptedModelServer, url: str | None, count: int
          ) -> list[Gateway]:
    gateways = []
    for n in range(count):
        home = folder / f"g{n}"
        write_config(home, model.openai_base_url, "[gateway]\nmax_concurrent_turns = 8\n")
        env = {"HEARTH_DATABASE_URL": url} if url else {}
        gateways.append(Gateway(home, env).start())
    return gateways


def drive(gateways: list[Gateway], chats: int, turns: int) -> tuple[float, list[float]]:
    """(turns per second, admission latencies in ms) of `chats` closed loops."""
    apis = [g.client() for g in gateways]
    keys = [apis[0].new_chat() for _ in range(chats)]
    latencies: list[float] = []
    lock = threading.Lock()

    def loop(index: int) -> None:
        key = keys[index]
        for turn in range(turns):
            api: Api = apis[(index + turn) % len(apis)]
            began = time.perf_counter()
            answer = api.http.post(f"/api/sessions/{key}/messages",
                                   json={"text": f"message {turn}"})
            took = (time.perf_counter() - began) * 1000
            assert answer.status_code == 202, answer.text
            with lock:
                latencies.append(took)
            api.wait(str(answer.json()["run_id"]), timeout=60)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(chats)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return chats * turns / (time.perf_counter() - began), latencies


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(name: str, model: ScriptedModelServer, url: str | None, count: int,
            args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="hearth-replicas-") as folder:
        gateways = start(Path(folder), model, url, count)
        try:
            drive(gateways, 2, 2)  # warm: the model's SDK, the first pages of each table
            rate, latencies = drive(gateways, args.chats, args.turns)
        finally:
            for gateway in gateways:
                gateway.stop()
    print(f"{name:<28} {rate:6.1f} turns/s   admission p50 "
          f"{statistics.median(latencies):6.2f} ms  p99 {percentile(latencies, 0.99):7.2f} ms")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=8)
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    model = ScriptedModelServer().start()
    model.default = Reply(text="A short answer.", chunks=2)
    model.keep_requests = False
    try:
        print(f"{args.chats} chats x {args.turns} turns, closed loops")
        sqlite = measure("SQLite, 1 gateway", model, None, 1, args)
        why = postgres.unavailable()
        if why is not None:
            print(f"PostgreSQL skipped: {why}")
            return
        one = measure("PostgreSQL, 1 gateway", model, _database(), 1, args)
        two = measure("PostgreSQL, 2 gateways", model, _database(), 2, args)
        print(f"ratios: PostgreSQL 1 / SQLite {one / sqlite:.2f}x; "
              f"2 gateways / 1 {two / one:.2f}x")
    finally:
        model.stop()


def _database() -> str:
    store = postgres.database()
    store.close()
    return store.url


if __name__ == "__main__":
    main()
