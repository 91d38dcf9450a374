"""Time from start to serving with 1,000 interrupted runs to recover.

Target: under 2 s before serving (their turns then run in the lanes).

It builds a home whose database holds N chats, each with a run that was `running` when its
gateway died (half of them mid-tool: a call recorded started and never finished), then starts
`hearth gateway` on it and times, from the process start, the first answered GET /healthz. The
same is timed on an empty home as the floor. It then waits until every recovered run has ended
(the fake model answers each resumed turn) and checks that no interrupted call was run again.

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/recovery.py [--runs 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from hearth.store import ledger, runs, sessions, transcript  # noqa: E402
from hearth.store.db import Database  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

TARGET_S = 2.0


def build_home(home: Path, model_url: str, count: int) -> None:
    """A home whose gateway died with `count` runs running, half of them inside a tool call."""
    write_config(home, model_url)
    db = Database(f"sqlite:///{home / 'hearth.db'}")
    db.upgrade()
    with db.write() as conn:
        for index in range(count):
            key = f"chat-{index + 1}-1764450000"
            tab = uuid.uuid4().hex
            sessions.insert(conn, key=key, tab_id=tab, memory_mode="persistent",
                            chat_number=index + 1)
            run_id = runs.new_run_id()
            user = transcript.append(conn, key, "user", {"text": f"question {index}"},
                                     run_id=run_id, idempotency_key=f"client:{index}")
            runs.insert(conn, run_id=run_id, session_key=key, tab_id=tab, generation=0,
                        user_event_seq=user.seq)
            runs.mark_running(conn, run_id)
            sessions.claim_writer(conn, key, run_id)
            if index % 2:
                call = {"call_id": f"c{index}", "name": "shell",
                        "arguments": {"command": "echo hi >> side-effects.log"}}
                transcript.append(conn, key, "tool_call", call, run_id=run_id)
                ledger.record_started(conn, run_id=run_id, session_key=key,
                                      call_id=f"c{index}", position=0, tool="shell",
                                      arguments=call["arguments"], effect="changes")
    db.close()


def time_to_serving(gateway: Gateway) -> float:
    begun = time.monotonic()
    gateway.start(wait=False)
    while True:
        try:
            if httpx.get(f"{gateway.url}/healthz", timeout=5).status_code == 200:
                return time.monotonic() - begun
        except httpx.HTTPError:
            pass
        time.sleep(0.005)


def wait_all_ended(url: str, count: int, timeout: float = 600) -> float:
    begun = time.monotonic()
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    while time.monotonic() - begun < timeout:
        listed = http.get("/api/sessions", params={"limit": 200}).json()["sessions"]
        busy = 0
        cursor = None
        while True:
            page = http.get("/api/sessions", params={"limit": 200, "cursor": cursor}
                            if cursor else {"limit": 200}).json()
            for chat in page["sessions"]:
                body = http.get(f"/api/sessions/{chat['key']}", params={"limit": 1}).json()
                busy += body["running"]
            cursor = page["next_cursor"]
            if not cursor:
                break
        if listed and busy == 0:
            return time.monotonic() - begun
        time.sleep(0.5)
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("Hearth bench: start to serving with interrupted runs to recover")
    print(f"  target: under {TARGET_S:g} s before serving with {args.runs:,} interrupted runs")
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    with ScriptedModelServer() as server:
        server.default = Reply(text="Recovered.")
        empty, full = [], []
        for attempt in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                floor_home = Path(tmp) / "empty"
                write_config(floor_home, server.openai_base_url)
                floor = Gateway(floor_home)
                empty.append(time_to_serving(floor))
                floor.kill()
                home = Path(tmp) / "full"
                begun = time.monotonic()
                build_home(home, server.openai_base_url, args.runs)
                built = time.monotonic() - begun
                gateway = Gateway(home)
                full.append(time_to_serving(gateway))
                if attempt == args.repeat - 1:
                    drained = wait_all_ended(gateway.url, args.runs)
                    log = home / "workspace" / "side-effects.log"
                    reran = log.read_text().count("hi") if log.exists() else 0
                    recovered_line = [line for line in gateway.output().splitlines()
                                      if "recovered in" in line]
                gateway.kill()
            print(f"  attempt {attempt + 1}: home of {args.runs:,} runs built in {built:.1f} s; "
                  f"serving after {full[-1]:.2f} s (empty home: {empty[-1]:.2f} s)")
        median_full, median_empty = statistics.median(full), statistics.median(empty)
        verdict = "MET" if median_full < TARGET_S else "MISSED"
        print(f"\nstart to serving, median of {args.repeat}:")
        print(f"  empty home           {median_empty:6.2f} s")
        print(f"  {args.runs:,} interrupted runs {median_full:6.2f} s   "
              f"(+{median_full - median_empty:.2f} s over empty, "
              f"ratio {median_full / median_empty:.2f}x)   target < {TARGET_S:g} s: {verdict}")
        for line in recovered_line:
            print(f"  gateway log: {line.split(': ', 1)[-1]}")
        print(f"then every recovered turn ended {drained:.1f} s after serving began; "
              f"{reran} interrupted call(s) were run again (must be 0); "
              f"{len(server.requests)} model calls")


if __name__ == "__main__":
    main()
