"""What a whole turn costs through the gateway, as a client sees it, and how fast it starts.

A real `hearth gateway` process (`python -m hearth gateway`, its own temp HEARTH_HOME; never
the tests' pre-imported launcher, so its start and its memory are a user's) talks to the
scripted fake model server (tests.fakes.model_server), which answers at once.

The client is the one issue 30 compares Hearth with its peers by: send a message (`POST
…/messages`), wait on its run (`GET /api/runs/{id}/wait`), read the last message (`GET
/api/sessions/{key}?limit=1`): three round trips, timed from the send to the answer in hand.
Where the gateway answers the run's answer with its end (`/wait?message=true`, issue 30), the
same phases run again with the two-trip client (send, wait with the message); a gateway that
does not (an older tree) is measured with the three-trip client only.

Phases, per client:
  * one chat, `--turns` turns in a row: p50/p95 of turns 1-20 and of turns 180-200, and their
    ratio (a turn must not get dearer as the chat grows);
  * `--chats` chats x `--per-chat` turns at once (a thread per chat): turns/s;
  * for each, the gateway's CPU per turn over all its threads (`/proc/<pid>/stat` utime+stime
    before and after the phase, divided by its turns: throughput is about 1000 / that);
then the gateway's resident memory after them all, and cold start, `--starts` times: process
start to `/healthz` answering on a new home (the first start makes the schema), then again on
that home (a restart: the schema is current) and on the restart to a first answer (new chat,
send, wait, read: the three-trip client). Medians are printed.

Targets (issue 30): turn p50 <= 12 ms for turns 1-20; growth <= 1.2x at turns 180-200;
>= 70 turns/s over 10 chats x 20 turns; CPU per turn <= 12 ms; RSS <= 110 MiB; cold start,
median of 5, <= 1.0 s to /healthz and <= 1.4 s to a first answer.

To compare trees, run it with PYTHONPATH pointing at another clone's src/: the gateway runs
that `hearth` (the line printed first says which), the client and the fakes stay this tree's.

A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/turns.py [--turns 200] [--chats 10] [--per-chat 20] [--starts 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
sys.path[len(sys.path):] = [str(ROOT / "src")]  # PYTHONPATH's src/ comes first

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, free_port, write_config  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side."
TICK = os.sysconf("SC_CLK_TCK")


class GatewayProcess:
    """`python -m hearth gateway` on `home`, started as a user starts it."""

    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
        env.update({"HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN,
                    "HEARTH_OLLAMA_URL": "http://127.0.0.1:9"})
        with open(home / "gateway.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hearth", "gateway", "--port", str(self.port)],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1) as probe:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the gateway exited {self.proc.returncode}")
                try:
                    if probe.get(f"{self.url}/healthz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.005)
        raise RuntimeError("the gateway did not answer /healthz")

    def cpu_seconds(self) -> float:
        """utime + stime of the gateway process, all its threads."""
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Chat:
    """One chat, sending one message at a time and taking its answer."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                                 timeout=60)
        self.key = str(self.http.post("/api/sessions", json={}).json()["key"])

    def _send(self) -> str:
        answer = self.http.post(f"/api/sessions/{self.key}/messages",
                                json={"text": "Where do the beds go?",
                                      "client_message_id": uuid.uuid4().hex})
        answer.raise_for_status()
        return str(answer.json()["run_id"])

    def _wait(self, run_id: str, message: bool) -> dict[str, object]:
        params = {"timeout": 30, **({"message": "true"} if message else {})}
        ended = self.http.get(f"/api/runs/{run_id}/wait", params=params).json()
        if ended.get("status") != "complete":
            raise RuntimeError(f"the turn ended {ended}")
        return dict(ended)

    def three_trips(self) -> float:
        """Send, wait on the run, read the last message: seconds taken."""
        started = time.perf_counter()
        run_id = self._send()
        self._wait(run_id, message=False)
        last = self.http.get(f"/api/sessions/{self.key}", params={"limit": 1}).json()
        _check(last["messages"][-1], run_id)
        return time.perf_counter() - started

    def two_trips(self) -> float:
        """Send, wait on the run with its answer: seconds taken."""
        started = time.perf_counter()
        run_id = self._send()
        message = self._wait(run_id, message=True).get("message")
        if not isinstance(message, dict):
            raise RuntimeError("the gateway answered no message with the run's end")
        _check(message, run_id)
        return time.perf_counter() - started

    def close(self) -> None:
        self.http.close()


def _check(message: dict[str, object], run_id: str) -> None:
    if message.get("run_id") != run_id or message.get("text") != ANSWER:
        raise RuntimeError(f"the answer read is not the turn's: {message}")


Turn = Callable[[Chat], float]
CLIENTS: dict[str, Turn] = {"three trips": Chat.three_trips, "two trips": Chat.two_trips}


def answers_with_message(url: str) -> bool:
    """Does this gateway answer a run's answer with its end (`/wait?message=true`)?"""
    chat = Chat(url)
    try:
        run_id = chat._send()
        return "message" in chat._wait(run_id, message=True)
    finally:
        chat.close()


def _summary(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = statistics.quantiles(ms, n=20)[18] if len(ms) > 1 else ms[0]
    return f"n={len(ms):<4} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms"


def one_chat(url: str, turns: int, turn: Turn) -> list[float]:
    chat = Chat(url)
    try:
        return [turn(chat) for _ in range(turns)]
    finally:
        chat.close()


def many_chats(url: str, chats: int, per_chat: int, turn: Turn) -> tuple[float, list[float]]:
    opened = [Chat(url) for _ in range(chats)]
    times: list[list[float]] = [[] for _ in opened]
    gate = threading.Barrier(chats + 1)

    def run(index: int) -> None:
        gate.wait()
        times[index] = [turn(opened[index]) for _ in range(per_chat)]

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


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def cpu_line(cpu: float, turns: int) -> str:
    per_turn = cpu * 1000 / turns
    return (f"gateway CPU {per_turn:5.2f} ms per turn (all threads)   target <= 12 ms: "
            f"{verdict(per_turn <= 12)}")


def phases(gateway: GatewayProcess, args: argparse.Namespace, name: str, turn: Turn) -> None:
    before = gateway.cpu_seconds()
    row = one_chat(gateway.url, args.turns, turn)
    cpu = gateway.cpu_seconds() - before
    first, late = row[:20], row[179:200] if len(row) >= 200 else row[-20:]
    print(f"\nClient: {name}. One chat, {args.turns} turns in a row")
    print(f"  turns 1-20     {_summary(first)}   target p50 <= 12 ms: "
          f"{verdict(statistics.median(first) <= 0.012)}")
    label = "turns 180-200" if len(row) >= 200 else f"last {len(late)} turns"
    growth = statistics.median(late) / statistics.median(first)
    print(f"  {label:<14} {_summary(late)}   growth {growth:.2f}x, target <= 1.2x: "
          f"{verdict(growth <= 1.2)}")
    print(f"  {cpu_line(cpu, len(row))}")
    before = gateway.cpu_seconds()
    wall, every = many_chats(gateway.url, args.chats, args.per_chat, turn)
    cpu = gateway.cpu_seconds() - before
    rate = len(every) / wall
    print(f"Client: {name}. {args.chats} chats x {args.per_chat} turns at once")
    print(f"  {_summary(every)}   wall {wall:.2f} s   {rate:.1f} turns/s   target >= 70: "
          f"{verdict(rate >= 70)}")
    print(f"  {cpu_line(cpu, len(every))}")


def measure(args: argparse.Namespace, model: ScriptedModelServer) -> None:
    home = Path(tempfile.mkdtemp(prefix="hearth-bench-turns-")) / "home"
    write_config(home, model.openai_base_url)
    gateway = GatewayProcess(home)
    try:
        gateway.wait_ready()
        names = ["three trips"]
        if answers_with_message(gateway.url):
            names.append("two trips")
        else:
            print("This gateway does not answer /wait?message=true: the two-trip client is "
                  "not run.")
        for name in names:
            phases(gateway, args, name, CLIENTS[name])
        rss = gateway.rss_mib()
        print(f"\nGateway RSS after: {rss:.1f} MiB   target <= 110: {verdict(rss <= 110)}")
    finally:
        gateway.stop()


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
    started = time.perf_counter()
    gateway = GatewayProcess(home)
    try:
        gateway.wait_ready()
        serving = time.perf_counter() - started
        if answer:
            chat = Chat(gateway.url)
            chat.three_trips()
            chat.close()
        return serving, time.perf_counter() - started
    finally:
        gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--per-chat", type=int, default=20)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    found = subprocess.run([sys.executable, "-c", "import hearth; print(hearth.__file__)"],
                           capture_output=True, text=True, check=False).stdout.strip()
    print(f"Hearth bench: turns through the gateway; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start; the gateway runs {Path(found).parent}")
    with ScriptedModelServer() as model:
        model.default = Reply(text=ANSWER)
        measure(args, model)
        starts = [cold_start(model) for _ in range(args.starts)]
    first = statistics.median(f for f, _, _ in starts)
    serving = statistics.median(s for _, s, _ in starts)
    answered = statistics.median(a for _, _, a in starts)
    print(f"\nCold start, median of {args.starts}: a restart (schema current) serving "
          f"{serving:.2f} s (target <= 1.0 s: {verdict(serving <= 1.0)}), first answer "
          f"{answered:.2f} s (target <= 1.4 s: {verdict(answered <= 1.4)}); the first start "
          f"on a new home (schema made) serving {first:.2f} s")
    print(f"  load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
