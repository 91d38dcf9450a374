"""A soak: many turns through one gateway, watching that nothing it holds grows.

A real `hearth gateway` process (tests.gateway.Gateway started as `python -m hearth gateway`,
never the tests' pre-imported launcher, so its memory is a user's; its own temp HEARTH_HOME)
talks to the scripted fake model server (tests.fakes.model_server), which answers at once, by
what each request says (its `responder`, keeping no request). `--turns` turns (20,000) go over
`--chats` chats (100; one in ten Incognito), `--workers` (10) clients at once, each with its
own chats, one turn at a time per chat. Turn n is, by n:

  * plain (88%): send the message, `GET /api/runs/{id}/wait`; timed from the send;
  * a tool call (8%): the model asks for `list_dir`, then answers;
  * an approval (2%): the model asks for `write_file` in a chat that asks first; the client
    holds the chat's event stream, answers the `approval` frame on `POST /api/approvals/{id}`
    (allow once, or deny, by turns) and reads on to the run's `done`;
  * stopped (2%): the model streams a slow answer; at its first `delta` the client
    `POST /api/sessions/{key}/stop`s it and reads on to `done` (outcome `stopped`);
  * a Temporary chat (1%): made, one turn, deleted.

Each chat has a first turn before the soak (its title made; not counted). At the start and
every `--sample-every` (1,000) turns the clients pause, the gateway is let settle (its task
count and store counters still for a moment), and its process is read: VmRSS and Threads
(`/proc/<pid>/status`), open files (`/proc/<pid>/fd`), asyncio tasks (`/healthz` with the
token: `tasks`), its CPU (utime + stime over all threads) and store writes and transactions
since the last sample, per turn. Then `--quiet` (20) plain turns run one at a time with
nothing beside them (one per chat, not counted in `--turns`): the quiet p50 and the gateway's
CPU per quiet turn, what a turn costs at that point of the soak. The window's busy p50 (plain
turns among the other clients', so mostly queueing) and tool p50 are printed beside it.

Targets (issue 30): after the first `--baseline` (2,000) turns none of RSS, open files,
threads and tasks grows by more than 10% to the end, and the quiet turn p50 at the end is
within 1.2x of the start's.

A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/soak.py [--turns 20000] [--chats 100] [--workers 10]
        [--sample-every 1000] [--baseline 2000] [--keep-home]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.model_server import Call, Recorded, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side."
READ, WRITE, SLOW = "[read]", "[write]", "[slow]"
SLOW_REPLY = Reply(text="and so on " * 60, chunks=60, delay=0.03)  # ~1.8 s, stopped early
KINDS = ("plain", "tool", "approval", "stopped", "temporary")
GROWTH_LIMIT = 1.10
P50_LIMIT = 1.2


def kind_of(n: int) -> str:
    """What turn n is: a tenth ask for a tool (one in five of those a write to approve), one
    in fifty is stopped, one in a hundred is a Temporary chat's."""
    if n % 50 == 21:
        return "approval"
    if n % 10 == 1:
        return "tool"
    if n % 50 == 47:
        return "stopped"
    if n % 100 == 59:
        return "temporary"
    return "plain"


def respond(request: Recorded) -> Reply | None:
    """The model's answer by what the request's last message says (None: `ANSWER`)."""
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        return Reply(text="Done; " + ANSWER)
    said = str(last.get("content"))
    if READ in said:
        return Reply(tool_calls=[Call("list_dir", {"path": "."})])
    if WRITE in said:
        name = f"soak/note-{abs(hash(said)) % 100}.txt"
        return Reply(tool_calls=[Call("write_file", {"path": name, "content": said})])
    if SLOW in said:
        return SLOW_REPLY
    return None


class ColdGateway(Gateway):
    """tests.gateway.Gateway started as a user starts it: `python -m hearth gateway`, not
    forked from the tests' launcher (whose imported pages would count in its memory)."""

    def start(self, wait: bool = True) -> Gateway:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(  # type: ignore[assignment]
                [sys.executable, "-m", "hearth", "gateway", "--port", str(self.port)],
                env=self.env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if wait:
            self.wait_ready()
        return self


class Client:
    """One worker's connection to the gateway, running one turn at a time."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=60,
                                 headers={"Authorization": f"Bearer {TOKEN}"})

    def new_chat(self, mode: str = "persistent") -> str:
        answer = _ok(self.http.post("/api/sessions",
                                    json={"trust": "ask", "memory_mode": mode}))
        return str(answer.json()["key"])

    def send(self, key: str, text: str) -> str:
        answer = _ok(self.http.post(f"/api/sessions/{key}/messages",
                                    json={"text": text, "client_message_id": uuid.uuid4().hex}))
        return str(answer.json()["run_id"])

    def waited(self, key: str, text: str) -> None:
        """Send and wait on the run's end (two round trips); it must complete."""
        run_id = self.send(key, text)
        answer = _ok(self.http.get(f"/api/runs/{run_id}/wait", params={"timeout": 60},
                                   timeout=70))
        status = answer.json()["status"]
        if status != "complete":
            raise RuntimeError(f"turn {run_id} ended {status}: {answer.text[:300]}")

    def streamed(self, key: str, text: str, n: int) -> None:
        """Hold the chat's stream, send, answer what it asks (an approval; Stop at the first
        delta of a slow answer) and read on to the run's `done`."""
        with self.http.stream("GET", f"/api/sessions/{key}/events", timeout=60) as response:
            frames = _frames(response.iter_lines())
            next(frames)  # the `status` at connect: the stream is subscribed
            run_id = self.send(key, text)
            outcome = self._to_done(frames, key, run_id, n, stop=SLOW in text)
        wanted = "stopped" if SLOW in text else "complete"
        if outcome != wanted:
            raise RuntimeError(f"turn {run_id} ended {outcome}, not {wanted}")

    def _to_done(self, frames: Iterator[dict[str, Any]], key: str, run_id: str, n: int,
                 stop: bool) -> str:
        stopped = not stop
        for frame in frames:
            if frame.get("run_id") != run_id:
                continue
            kind = frame.get("type")
            if kind == "approval" and frame["approval"]["status"] == "pending":
                decision = "allow_once" if n % 100 < 50 else "deny"
                _ok(self.http.post(f"/api/approvals/{frame['approval']['id']}",
                                   json={"decision": decision}))
            elif kind == "delta" and not stopped:
                stopped = True
                _ok(self.http.post(f"/api/sessions/{key}/stop", json={}))
            elif kind == "done":
                return str(frame.get("outcome"))
        raise RuntimeError("the event stream ended before the turn did")

    def temporary(self, text: str) -> None:
        key = self.new_chat("temporary")
        self.waited(key, text)
        _ok(self.http.delete(f"/api/sessions/{key}"))

    def close(self) -> None:
        self.http.close()


def _ok(answer: httpx.Response) -> httpx.Response:
    """The answer, or a RuntimeError naming its status and body."""
    if answer.is_error:
        raise RuntimeError(f"{answer.request.method} {answer.request.url.path}: "
                           f"{answer.status_code} {answer.text[:200]}")
    return answer


def _frames(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


def one_turn(client: Client, key: str, n: int) -> tuple[str, float]:
    """Turn n in chat `key`: its kind and the seconds it took."""
    kind = kind_of(n)
    started = time.perf_counter()
    if kind == "plain":
        client.waited(key, f"Turn {n}: where do the beds go?")
    elif kind == "tool":
        client.waited(key, f"Turn {n}: {READ} what is in the folder?")
    elif kind == "approval":
        client.streamed(key, f"Turn {n}: {WRITE} keep a note", n)
    elif kind == "stopped":
        client.streamed(key, f"Turn {n}: {SLOW} tell me everything", n)
    else:
        client.temporary(f"Turn {n}: a question for a chat that ends")
    return kind, time.perf_counter() - started


@dataclass
class Window:
    """The turns of one window: seconds taken by kind, and the failures."""

    times: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.times[kind].append(seconds)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)

    def p50_ms(self, kind: str) -> float:
        return ms(self.times[kind])


def run_window(clients: list[Client], keys: list[str], first: int, count: int) -> Window:
    """Turns first..first+count-1, turn n in chat n % chats, chat c run by client c % workers
    (so a chat has one turn at a time); every client at once."""
    window = Window()
    mine: list[list[int]] = [[] for _ in clients]
    for n in range(first, first + count):
        mine[(n % len(keys)) % len(clients)].append(n)

    def work(index: int) -> None:
        for n in mine[index]:
            try:
                window.add(*one_turn(clients[index], keys[n % len(keys)], n))
            except (httpx.HTTPError, RuntimeError) as error:
                window.fail(f"turn {n} ({kind_of(n)}): {error}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return window


@dataclass
class Sample:
    """The gateway process at rest after `turns` turns of the soak (`ran`: every turn run so
    far, the quiet ones and the warm-up included)."""

    turns: int
    ran: int
    rss_mib: float
    fds: int
    threads: int
    tasks: int
    cpu_s: float  # utime + stime, every thread, since the process started
    writes: int  # the store writer's writes since start
    transactions: int


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    raise RuntimeError(f"no {name} in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def health(http: httpx.Client) -> dict[str, Any]:
    return dict(_ok(http.get("/healthz")).json())


def settle(http: httpx.Client, quiet: float = 0.3, limit: float = 15.0) -> dict[str, Any]:
    """Wait until the gateway is still (the same tasks and store counters `quiet` seconds
    apart: the turns' chores done) or `limit` seconds pass; its `/healthz` then."""
    deadline = time.monotonic() + limit
    before = health(http)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = health(http)
        if (now["tasks"], now["store"]) == (before["tasks"], before["store"]):
            return now
        before = now
    return before


def sample(pid: int, http: httpx.Client, turns: int, ran: int) -> Sample:
    still = settle(http)
    return Sample(turns=turns, ran=ran, rss_mib=int(status_field(pid, "VmRSS")) / 1024,
                  fds=len(os.listdir(f"/proc/{pid}/fd")),
                  threads=int(status_field(pid, "Threads")), tasks=int(still["tasks"]),
                  cpu_s=cpu_seconds(pid), writes=int(still["store"]["writes"]),
                  transactions=int(still["store"]["transactions"]))


def warm(clients: list[Client], keys: list[str]) -> None:
    """Each chat's first turn (its title made), every client at once; not counted."""

    def work(index: int) -> None:
        for key in keys[index::len(clients)]:
            clients[index].waited(key, "Hello! We are planning a garden.")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@dataclass
class Quiet:
    """Turns run one at a time with nothing beside them: each one's seconds, and the gateway's
    CPU per turn over them (ms; steadier than their wall time on a busy machine)."""

    times: list[float]
    cpu_ms: float


def quiet_turns(client: Client, keys: list[str], count: int, pid: int) -> Quiet:
    """`count` plain turns one after another with nothing else running, one per chat: what a
    turn costs at this point of the soak, without the other clients' queueing."""
    times, cpu = [], cpu_seconds(pid)
    for i in range(count):
        started = time.perf_counter()
        client.waited(keys[i % len(keys)], "A quiet turn: where do the beds go?")
        times.append(time.perf_counter() - started)
    return Quiet(times, (cpu_seconds(pid) - cpu) * 1000 / max(1, count))


HEADER = (f"{'turns':>6} {'RSS MiB':>8} {'fds':>5} {'thr':>4} {'tasks':>5} "
          f"{'quiet p50':>10} {'q CPU':>7} {'busy p50':>9} {'tool p50':>9} {'CPU/turn':>9} "
          f"{'writes/t':>8} {'tx/t':>6}")


def ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000 if seconds else float("nan")


def row(now: Sample, last: Sample, window: Window | None, quiet: Quiet) -> str:
    turns = max(1, now.ran - last.ran)
    busy = f"{window.p50_ms('plain'):7.1f}ms" if window else f"{'':>9}"
    tool = f"{window.p50_ms('tool'):7.1f}ms" if window else f"{'':>9}"
    cpu = f"{(now.cpu_s - last.cpu_s) * 1000 / turns:7.1f}ms" if window else f"{'':>9}"
    writes = f"{(now.writes - last.writes) / turns:8.1f}" if window else f"{'':>8}"
    tx = f"{(now.transactions - last.transactions) / turns:6.1f}" if window else f"{'':>6}"
    return (f"{now.turns:>6} {now.rss_mib:8.1f} {now.fds:5d} {now.threads:4d} "
            f"{now.tasks:5d} {ms(quiet.times):8.1f}ms {quiet.cpu_ms:5.1f}ms {busy} {tool} {cpu} "
            f"{writes} {tx}")


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def growth_verdicts(samples: list[Sample], baseline: int) -> None:
    """Each figure at the end and at its peak against the sample at `baseline` turns."""
    base = next((s for s in samples if s.turns >= baseline and s is not samples[-1]), None)
    if base is None:
        base = samples[1] if len(samples) > 2 else samples[0]
        print(f"  (the run is not longer than {baseline} turns: measured from {base.turns})")
    end = samples[-1]
    after = [s for s in samples if s.turns >= base.turns]
    print(f"Growth from turn {base.turns} to turn {end.turns} (limit +10%):")
    for name, unit in (("rss_mib", "MiB"), ("fds", ""), ("threads", ""), ("tasks", "")):
        first, last = getattr(base, name), getattr(end, name)
        peak = max(getattr(s, name) for s in after)
        ratio = last / first if first else float("inf")
        print(f"  {name:<8} {first:8.1f} -> {last:8.1f} {unit:<3} (peak {peak:.1f})  "
              f"{(ratio - 1) * 100:+6.1f}%  {verdict(ratio <= GROWTH_LIMIT)}")


def p50_verdict(quiet: list[Quiet], windows: list[Window]) -> None:
    start, end = ms(quiet[0].times), ms(quiet[-1].times)
    print(f"Turn p50, quiet (one turn at a time): at the start {start:.1f} ms, at the end "
          f"{end:.1f} ms: {end / start:.2f}x (limit {P50_LIMIT}x) "
          f"{verdict(end / start <= P50_LIMIT)}")
    print(f"  the gateway's CPU per quiet turn: {quiet[0].cpu_ms:.1f} ms at the start, "
          f"{quiet[-1].cpu_ms:.1f} ms at the end: {quiet[-1].cpu_ms / quiet[0].cpu_ms:.2f}x "
          f"(the same growth, steadier than wall time on a busy machine)")
    first, last = windows[0].p50_ms("plain"), windows[-1].p50_ms("plain")
    print(f"  busy (plain turns beside the other clients'): first window {first:.1f} ms, last "
          f"{last:.1f} ms: {last / first:.2f}x")


def soak(args: argparse.Namespace, gateway: Gateway) -> None:
    assert gateway.proc is not None
    pid = gateway.proc.pid
    clients = [Client(gateway.url) for _ in range(args.workers)]
    keys = [clients[c % args.workers].new_chat("incognito" if c % 10 == 9 else "persistent")
            for c in range(args.chats)]
    warm(clients, keys)
    ran = len(keys)
    samples, windows = [sample(pid, clients[0].http, 0, ran)], []
    quiet = [quiet_turns(clients[0], keys, args.quiet, pid)]
    print(HEADER)
    print(row(samples[0], samples[0], None, quiet[0]))
    started, done = time.perf_counter(), 0
    while done < args.turns:
        count = min(args.sample_every, args.turns - done)
        windows.append(run_window(clients, keys, done, count))
        done, ran = done + count, ran + count + args.quiet
        samples.append(sample(pid, clients[0].http, done, ran))
        quiet.append(quiet_turns(clients[0], keys, args.quiet, pid))
        print(row(samples[-1], samples[-2], windows[-1], quiet[-1]), flush=True)
        for failure in windows[-1].failures[:3]:
            print(f"    failed: {failure}")
    report(args, samples, windows, time.perf_counter() - started)
    p50_verdict(quiet, windows)
    for client in clients:
        client.close()


def report(args: argparse.Namespace, samples: list[Sample], windows: list[Window],
           wall: float) -> None:
    counts = {k: sum(len(w.times[k]) for w in windows) for k in KINDS}
    failed = sum(len(w.failures) for w in windows)
    cpu = (samples[-1].cpu_s - samples[0].cpu_s) * 1000 / max(1, samples[-1].ran - samples[0].ran)
    print(f"\n{args.turns} turns in {wall:.0f} s ({args.turns / wall:.1f} turns/s, the pauses "
          f"to sample included); " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + f"; failed {failed}")
    print(f"Gateway CPU per turn over the run (every thread, chores included): {cpu:.1f} ms\n")
    growth_verdicts(samples, args.baseline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument("--baseline", type=int, default=2000)
    parser.add_argument("--quiet", type=int, default=20,
                        help="quiet turns (one at a time) timed at each sample")
    parser.add_argument("--keep-home", action="store_true",
                        help="keep the gateway's home (its log and database) to look at after")
    args = parser.parse_args()
    args.workers = max(1, min(args.workers, args.chats))
    print(f"Hearth bench: soak, {args.turns} turns over {args.chats} chats, {args.workers} "
          f"clients; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start\n")
    folder = Path(tempfile.mkdtemp(prefix="hearth-bench-soak-"))
    try:
        with ScriptedModelServer() as model:
            model.default = Reply(text=ANSWER)
            model.responder = respond
            model.keep_requests = False
            write_config(folder / "home", model.openai_base_url)
            gateway = ColdGateway(folder / "home").start()
            try:
                soak(args, gateway)
            finally:
                gateway.kill()
    finally:
        if args.keep_home:
            print(f"  the gateway's home (its log, its database) is kept in {folder}/home")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"  load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
