"""How long a stop takes: SIGTERM to the process gone, for a gateway with nothing running,
one whose chat waits on an approval, and one mid-answer (the grace period's case).

A real `hearth gateway` process (bench/turns.py's `GatewayProcess`, its own temp HEARTH_HOME)
talks to the scripted fake model server. With the default grace of 10 s:
  * idle: no turn runs;
  * waiting: a chat's call waits for the owner's Allow (nothing of it runs);
  * answering: a turn is mid-stream (the model holds its answer), so the stop gives it the
    whole grace before leaving it to be resumed; the ceiling the other two must stay far below.

Target (issue 43): idle and waiting <= 2 s each.

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/stops.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from turns import TOKEN, GatewayProcess, write_config  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402

Prepare = Callable[[httpx.Client, ScriptedModelServer], None]


def _idle(http: httpx.Client, model: ScriptedModelServer) -> None:
    pass


def _waiting(http: httpx.Client, model: ScriptedModelServer) -> None:
    model.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]))
    key = http.post("/api/sessions", json={"trust": "ask"}).json()["key"]
    http.post(f"/api/sessions/{key}/messages", json={"text": "write a"})
    deadline = time.monotonic() + 10
    while not http.get("/api/approvals").json()["approvals"]:
        if time.monotonic() > deadline:
            raise RuntimeError("no approval was asked")
        time.sleep(0.02)


def _answering(http: httpx.Client, model: ScriptedModelServer) -> None:
    model.push(Reply(text="never", hold=threading.Event()))
    key = http.post("/api/sessions", json={}).json()["key"]
    http.post(f"/api/sessions/{key}/messages", json={"text": "a long one"})
    model.wait_for_requests(1, timeout=10)


def stop_seconds(prepare: Prepare) -> float:
    with tempfile.TemporaryDirectory() as folder, ScriptedModelServer() as model:
        home = Path(folder)
        write_config(home, model.openai_base_url)
        gateway = GatewayProcess(home)
        gateway.wait_ready()
        with httpx.Client(base_url=gateway.url, timeout=10,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            prepare(http, model)
        began = time.monotonic()
        gateway.stop()
        return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    medians = {}
    for name, prepare in (("idle", _idle), ("waiting", _waiting), ("answering", _answering)):
        times = [stop_seconds(prepare) for _ in range(repeat)]
        medians[name] = statistics.median(times)
        shown = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:>9}: stop median {medians[name]:.2f} s ({shown})")
    for name in ("idle", "waiting"):
        verdict = "ok" if medians[name] <= 2 else "OVER"
        print(f"{name:>9}: target <= 2 s: {verdict}; "
              f"{medians['answering'] / max(medians[name], 1e-3):.1f}x below the grace case")


if __name__ == "__main__":
    main()
