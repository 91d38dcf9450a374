"""What a gateway's memory is, and what holds it: resident memory at start, after turns and at
rest, then the packages holding the most (tracemalloc, `hearth/allocations.py`).

A real `python -m hearth gateway` (not the tests' launcher, whose imports it would inherit) on
a temporary home with the scripted fake model server (tests.fakes.model_server) answering at
once. By default the home's schema is current before the start, as on every restart (a first
start on a new home also imports Alembic to make the schema: `--first-start`). Clients send
`--turns` turns over `--chats` chats (send, then wait on the run), ten chats at once.

Twice: untraced, for the resident memory (target: <= 110 MiB at rest after the turns), then
under PYTHONTRACEMALLOC=1, whose shutdown log lines name the packages holding the most (a
traced gateway is larger and slower: only its ranking counts).

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/memory.py [--turns 400] [--chats 10] [--first-start]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
sys.path[len(sys.path):] = [str(ROOT / "src")]  # PYTHONPATH's src/ comes first

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, free_port, write_config  # noqa: E402
from tests.support.store import seed_home  # noqa: E402

TARGET_MIB = 110.0


class Gateway:
    """`python -m hearth gateway` on `home`, its log kept."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = home / "gateway.log"
        full = {k: v for k, v in os.environ.items()
                if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_", "PYTHONTRACEMALLOC"))}
        full.update({"HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN,
                     "HEARTH_OLLAMA_URL": "http://127.0.0.1:9", **env})
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hearth", "gateway", "--port", self.url.rsplit(":", 1)[1]],
                env=full, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def started(self, timeout: float = 120.0) -> None:
        """Until /healthz answers with nothing left starting."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited {self.proc.returncode}")
            try:
                health = httpx.get(f"{self.url}/healthz", timeout=5).json()
                if not health.get("starting"):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the gateway did not finish starting")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> str:
        """Stop it as a signal does; its log."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(600)
        return self.log.read_text(errors="replace")


def turns(url: str, count: int, chats: int) -> None:
    """`count` turns over `chats` chats, each chat's turns one after another, chats at once."""
    def run(turns_here: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=120) as http:
            key = http.post("/api/sessions", json={}).json()["key"]
            for _ in range(turns_here):
                run_id = http.post(f"/api/sessions/{key}/messages",
                                   json={"text": "Where do the beds go?",
                                         "client_message_id": uuid.uuid4().hex}).json()["run_id"]
                http.get(f"/api/runs/{run_id}/wait", params={"timeout": 60})

    threads = [threading.Thread(target=run, args=(count // chats,)) for _ in range(chats)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def one_gateway(model: ScriptedModelServer, args: argparse.Namespace,
                env: dict[str, str]) -> tuple[list[tuple[str, float]], str]:
    home = Path(tempfile.mkdtemp(prefix="hearth-bench-memory-")) / "home"
    write_config(home, model.openai_base_url)
    if not args.first_start:
        seed_home(home)  # the schema made, as a restart finds it
    gateway = Gateway(home, env)
    gateway.started()
    figures = [("at start", gateway.rss_mib())]
    turns(gateway.url, args.turns, args.chats)
    figures.append((f"after {args.turns} turns", gateway.rss_mib()))
    time.sleep(2)
    figures.append(("at rest (2 s later)", gateway.rss_mib()))
    return figures, gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--first-start", action="store_true",
                        help="start on a new home (the schema made by Alembic at start)")
    args = parser.parse_args()
    print(f"Hearth bench: the gateway's memory; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}; {'a first start' if args.first_start else 'a restart'}\n")
    with ScriptedModelServer() as model:
        model.default = Reply(text="Noted: the raised beds go on the south side.")
        figures, _ = one_gateway(model, args, {})
        for label, mib in figures:
            print(f"  resident {label:<22} {mib:6.1f} MiB")
        rest = figures[-1][1]
        print(f"  target at rest <= {TARGET_MIB:.0f} MiB: "
              f"{'met' if rest <= TARGET_MIB else 'MISSED'}")
        _, log = one_gateway(model, args, {"PYTHONTRACEMALLOC": "1"})
    print("\nTraced (PYTHONTRACEMALLOC=1), at shutdown: the packages holding the most")
    for line in log.splitlines():
        if "hearth.allocations" in line:
            print("  " + line.split("hearth.allocations: ", 1)[1])


if __name__ == "__main__":
    main()
