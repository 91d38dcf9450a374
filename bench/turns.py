"""What a whole turn costs through the gateway, as a client sees it, and how fast it starts.

A real `hearth gateway` subprocess (tests.gateway.Gateway, its own temp HEARTH_HOME) talks to
the scripted fake model server (tests.fakes.model_server), which answers at once. The client
keeps the chat's event stream open (`GET /api/sessions/{key}/events`), sends a message
(`POST …/messages`) and reads the stream until the `done` frame of that run: one turn, timed
from the send to the `done`.

Phases:
  * one chat, `--turns` turns in a row: p50/p95 of turns 1-20 and of turns 180-200, and their
    ratio (a turn must not get dearer as the chat grows);
  * `--chats` chats x `--per-chat` turns at once (a thread and a stream per chat): turns/s;
  * the gateway's resident memory after both;
  * cold start, `--starts` times: process start to `/healthz` answering on a new home (the
    first start makes the schema), then again on that home (a restart: the schema is current,
    so Alembic is never imported), and on the restart to a first answer (new chat, send,
    `done`).

Targets (issue 12): p50 <= 15 ms for turns 1-20; growth <= 1.2x; >= 70 turns/s over 10 chats;
RSS <= 120 MiB; <= 1.0 s to serving.

A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/turns.py [--turns 200] [--chats 10] [--per-chat 20] [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side."


class Chat:
    """One chat with its event stream held open, sending one message at a time."""

    def __init__(self, url: str) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=60)
        self.key = str(self.http.post("/api/sessions", json={}).json()["key"])
        self._stream = httpx.Client(base_url=url, headers=headers, timeout=None)
        self._response = self._stream.send(
            self._stream.build_request("GET", f"/api/sessions/{self.key}/events"), stream=True)
        self._lines = self._response.iter_lines()

    def turn(self) -> float:
        """Send one message and read the stream to its run's `done`: seconds taken."""
        started = time.perf_counter()
        answer = self.http.post(f"/api/sessions/{self.key}/messages",
                                json={"text": "Where do the beds go?",
                                      "client_message_id": uuid.uuid4().hex})
        answer.raise_for_status()
        run_id = answer.json()["run_id"]
        for frame in self._frames():
            if frame.get("type") == "done" and frame.get("run_id") == run_id:
                if frame.get("outcome") != "complete":
                    raise RuntimeError(f"the turn ended {frame}")
                return time.perf_counter() - started
        raise RuntimeError("the event stream ended before the turn did")

    def _frames(self) -> Iterator[dict[str, object]]:
        for line in self._lines:
            if line.startswith("data:"):
                yield json.loads(line[5:])

    def close(self) -> None:
        self._response.close()
        self._stream.close()
        self.http.close()


def _summary(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = statistics.quantiles(ms, n=20)[18] if len(ms) > 1 else ms[0]
    return f"n={len(ms):<4} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms"


def one_chat(url: str, turns: int) -> list[float]:
    chat = Chat(url)
    try:
        return [chat.turn() for _ in range(turns)]
    finally:
        chat.close()


def many_chats(url: str, chats: int, per_chat: int) -> tuple[float, list[float]]:
    opened = [Chat(url) for _ in range(chats)]
    times: list[list[float]] = [[] for _ in opened]
    gate = threading.Barrier(chats + 1)

    def run(index: int) -> None:
        gate.wait()
        times[index] = [opened[index].turn() for _ in range(per_chat)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(chats)]
    for thread in threads:
        thread.start()
    gate.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    for chat in opened:
        chat.close()
    return wall, [t for each in times for t in each]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cold_start(model: ScriptedModelServer) -> tuple[float, float, float]:
    """Seconds from process start to /healthz answering on a new home (the first start: the
    schema is made), and on the same home again (a restart: the schema is current), and to
    a first answer on that restart."""
    home = Path(tempfile.mkdtemp(prefix="hearth-bench-start-")) / "home"
    write_config(home, model.openai_base_url)
    first, _ = _one_start(home, answer=False)
    again, answered = _one_start(home, answer=True)
    return first, again, answered


def _one_start(home: Path, answer: bool) -> tuple[float, float]:
    gateway = Gateway(home)
    started = time.perf_counter()
    gateway.start(wait=False)
    try:
        while True:
            try:
                if httpx.get(f"{gateway.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.005)
        serving = time.perf_counter() - started
        if answer:
            chat = Chat(gateway.url)
            chat.turn()
            chat.close()
        return serving, time.perf_counter() - started
    finally:
        gateway.stop()


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def measure(args: argparse.Namespace, model: ScriptedModelServer) -> None:
    home = Path(tempfile.mkdtemp(prefix="hearth-bench-turns-")) / "home"
    write_config(home, model.openai_base_url)
    gateway = Gateway(home).start()
    try:
        row = one_chat(gateway.url, args.turns)
        first, late = row[:20], row[179:200] if len(row) >= 200 else row[-20:]
        print(f"One chat, {args.turns} turns in a row (send, then read the stream to `done`)")
        print(f"  turns 1-20     {_summary(first)}")
        label = "turns 180-200" if len(row) >= 200 else f"last {len(late)} turns"
        print(f"  {label:<14} {_summary(late)}")
        growth = statistics.median(late) / statistics.median(first)
        print(f"  growth (p50 late / early): {growth:.2f}x   target <= 1.2x: "
              f"{verdict(growth <= 1.2)};  p50 <= 15 ms for turns 1-20: "
              f"{verdict(statistics.median(first) <= 0.015)}")
        wall, every = many_chats(gateway.url, args.chats, args.per_chat)
        rate = len(every) / wall
        print(f"\n{args.chats} chats x {args.per_chat} turns at once")
        print(f"  {_summary(every)}   wall {wall:.2f} s   {rate:.1f} turns/s   "
              f"target >= 70: {verdict(rate >= 70)}")
        assert gateway.proc is not None
        rss = rss_mib(gateway.proc.pid)
        print(f"\nGateway RSS after: {rss:.1f} MiB   target <= 120: {verdict(rss <= 120)}")
    finally:
        gateway.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--per-chat", type=int, default=20)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    print(f"Hearth bench: turns through the gateway; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start\n")
    with ScriptedModelServer() as model:
        model.default = Reply(text=ANSWER)
        measure(args, model)
        starts = [cold_start(model) for _ in range(args.starts)]
    first = statistics.median(f for f, _, _ in starts)
    serving = statistics.median(s for _, s, _ in starts)
    answered = statistics.median(a for _, _, a in starts)
    print(f"\nCold start, median of {args.starts}: a restart (schema current) serving "
          f"{serving:.2f} s (target <= 1.0 s: {verdict(serving <= 1.0)}), first answer "
          f"{answered:.2f} s; the first start on a new home (schema made) serving {first:.2f} s")
    print(f"  load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
