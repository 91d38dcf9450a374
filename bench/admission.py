"""ACK latency of POST /api/sessions/{key}/messages against a real gateway subprocess.

Targets (2-core box): 1 sender with turns running beside it p50 <= 2 ms, p99 <= 10 ms; 50
closed-loop senders p99 <= 60 ms. Admission is a promise: the one writer commits the messages
that arrive together in one transaction (group commit), and the run reports how many
transactions (fsyncs) the gateway made per acknowledged message.

The gateway runs as `hearth gateway` in a subprocess (tests.gateway.Gateway) with its own temp
HEARTH_HOME, pointed at the scripted fake model server (tests.fakes.model_server) answering a
short text, so every admitted message's turn runs to its end in the background while the
next messages are admitted, as in real use. Each latency is client-observed: from sending the
request to holding the 202, over a keep-alive connection (one httpx.Client per sender).

The load generator (this process, fake model server included) shares the machine's cores with
the gateway, so its own CPU time is inside the figures.

A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/admission.py [--messages 400] [--chats 20] [--senders 50]
        [--per-sender 16] [--think 0] [--duplicates 100] [--parked 80] [--max-turns 4]
        [--synchronous FULL] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

P50_TARGET_MS = 2.0  # one sender, turns running beside it
P99_TARGET_MS = 10.0
P99_MANY_TARGET_MS = 60.0  # fifty closed-loop senders
TEXT = "Remind me what we decided about the garden layout, in one line please."


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)  # seconds
    failures: list[str] = field(default_factory=list)
    last_run: dict[str, str] = field(default_factory=dict)  # chat key -> last run id
    sent: dict[str, tuple[str, str]] = field(default_factory=dict)  # client id -> (key, run)


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


def post_message(http: httpx.Client, key: str, client_id: str, sample: Sample) -> None:
    body = {"text": TEXT, "client_message_id": client_id}
    start = time.perf_counter()
    answer = http.post(f"/api/sessions/{key}/messages", json=body)
    elapsed = time.perf_counter() - start
    if answer.status_code != 202:
        sample.failures.append(f"{answer.status_code} {answer.text[:200]}")
        return
    sample.latencies.append(elapsed)
    run_id = answer.json()["run_id"]
    sample.last_run[key] = run_id
    sample.sent[client_id] = (key, run_id)


def new_chats(http: httpx.Client, count: int) -> list[str]:
    keys = []
    for _ in range(count):
        answer = http.post("/api/sessions", json={})
        answer.raise_for_status()
        keys.append(str(answer.json()["key"]))
    return keys


# ----------------------------------------------------------------------------- phases


def one_sender(url: str, keys: Sequence[str], messages: int) -> Sample:
    """One client, `messages` sequential sends spread round-robin over the chats."""
    sample = Sample()
    with client(url) as http:
        for i in range(messages):
            post_message(http, keys[i % len(keys)], f"one-{uuid.uuid4().hex}", sample)
    return sample


def many_senders(
    url: str, keys: Sequence[str], per_sender: int, think: float = 0.0
) -> tuple[Sample, float]:
    """One thread and one keep-alive client per chat, all started together.

    With `think` > 0 each sender pauses a random 0..2*think seconds between its messages (a
    person typing) instead of sending back to back.
    """
    samples = [Sample() for _ in keys]
    clients = [client(url) for _ in keys]
    for http in clients:  # open each keep-alive connection before the clock starts
        http.get("/healthz")
    gate = threading.Barrier(len(keys) + 1)

    def sender(index: int) -> None:
        pause = random.Random(index)
        gate.wait()
        for n in range(per_sender):
            if think > 0 and n:
                time.sleep(pause.uniform(0, 2 * think))
            post_message(clients[index], keys[index], f"many-{uuid.uuid4().hex}", samples[index])

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(len(keys))]
    for thread in threads:
        thread.start()
    gate.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    for http in clients:
        http.close()
    merged = Sample()
    for s in samples:
        merged.latencies += s.latencies
        merged.failures += s.failures
        merged.last_run.update(s.last_run)
        merged.sent.update(s.sent)
    return merged, wall


def duplicates(url: str, sent: dict[str, tuple[str, str]], count: int) -> Sample:
    """Send already-acknowledged client message ids again; each must answer the same run."""
    sample = Sample()
    with client(url) as http:
        for client_id, (key, run_id) in list(sent.items())[:count]:
            body = {"text": TEXT, "client_message_id": client_id}
            start = time.perf_counter()
            answer = http.post(f"/api/sessions/{key}/messages", json=body)
            elapsed = time.perf_counter() - start
            got = answer.json() if answer.status_code == 202 else {}
            if got.get("run_id") != run_id or not got.get("duplicate"):
                sample.failures.append(f"{answer.status_code} {answer.text[:200]}")
                continue
            sample.latencies.append(elapsed)
    return sample


def healthz_floor(url: str, count: int) -> Sample:
    """GET /healthz the same way: the HTTP + client floor under every figure (no store work)."""
    sample = Sample()
    with client(url) as http:
        for _ in range(count):
            start = time.perf_counter()
            http.get("/healthz")
            sample.latencies.append(time.perf_counter() - start)
    return sample


def drain(url: str, last_run: dict[str, str], timeout: float = 300) -> float:
    """Wait for every chat's last run to end (each lane runs its queue in order)."""
    start = time.perf_counter()
    with client(url) as http:
        for run_id in last_run.values():
            left = max(1.0, timeout - (time.perf_counter() - start))
            http.get(f"/api/runs/{run_id}/wait", params={"timeout": min(left, 600)},
                     timeout=left + 5)
    return time.perf_counter() - start


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU the process has used so far (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(label: str, sample: Sample, wall: float | None = None, targets: bool = True) -> None:
    ms = [x * 1000 for x in sample.latencies]
    print(f"\n{label}")
    if not ms:
        print(f"  no successful requests; failures: {sample.failures[:3]}")
        return
    p50, p90, p99 = statistics.median(ms), pct(ms, 90), pct(ms, 99)
    print(f"  n={len(ms)}  p50 {p50:7.2f} ms   p90 {p90:7.2f} ms   p99 {p99:7.2f} ms   "
          f"max {max(ms):7.2f} ms   mean {statistics.fmean(ms):7.2f} ms")
    if wall is not None:
        print(f"  wall {wall:.2f} s, {len(ms) / wall:.0f} ACKs/s")
    if sample.failures:
        print(f"  FAILURES: {len(sample.failures)}, first: {sample.failures[0]}")
    if targets:
        ok50 = "met" if p50 <= P50_TARGET_MS else "MISSED"
        ok99 = "met" if p99 <= P99_TARGET_MS else "MISSED"
        print(f"  target p50 <= {P50_TARGET_MS:g} ms: {ok50}    "
              f"target p99 <= {P99_TARGET_MS:g} ms: {ok99}")


# ----------------------------------------------------------------------------- profile


def profile_in_process(messages: int, synchronous: str) -> None:
    """cProfile `admission.admit` (validate, the store transaction, publish) in this process."""
    import cProfile
    import pstats

    from hearth.engine.delivery.events import Bus
    from hearth.engine.intake import admission
    from hearth.privacy.principal import OWNER
    from hearth.sessions import chats
    from hearth.store.db import Database

    with tempfile.TemporaryDirectory(prefix="hearth-bench-prof-") as tmp:
        db = Database(f"sqlite:///{tmp}/hearth.db", synchronous=synchronous)
        db.upgrade()
        bus = Bus()
        async def admit_all(count: int, prefix: str = "") -> None:
            keys = [(await chats.open_chat(db)).session.key for _ in range(20)]
            for i in range(count):
                await admission.admit(db, bus, keys[i % len(keys)], TEXT,
                                      client_message_id=prefix + uuid.uuid4().hex,
                                      principal=OWNER)

        asyncio.run(admit_all(50, "warm-"))
        start = time.perf_counter()
        asyncio.run(admit_all(messages))
        plain = (time.perf_counter() - start) / messages * 1000
        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(admit_all(messages))
        profiler.disable()
        print(f"\nIn-process: admission.admit x{messages} (no HTTP, no turns), synchronous="
              f"{synchronous}: {plain:.2f} ms per call (without the profiler)")
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(25)
        stats.sort_stats("tottime").print_stats(12)
        db.close()


# ----------------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> None:
    cores = os.cpu_count()
    print("Hearth bench: ACK latency of POST /api/sessions/{key}/messages")
    print(f"  targets: p50 <= {P50_TARGET_MS:g} ms, p99 <= {P99_TARGET_MS:g} ms")
    print(f"  machine: {cores} cores, load average {os.getloadavg()[0]:.2f} at start. The load "
          "generator and the fake model server run in this process and share those cores with "
          "the gateway; their CPU time is inside every figure.")
    print(f"  gateway: [gateway] max_concurrent_turns = {args.max_turns}, [store] synchronous = "
          f"{args.synchronous}; each admitted turn runs against the fake model in the background")

    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as tmp, \
            ScriptedModelServer() as model:
        model.default = Reply(text="Noted: the raised beds go on the south side.")
        home = Path(tmp) / "home"
        write_config(home, model.openai_base_url,
                     extra=f"[gateway]\nmax_concurrent_turns = {args.max_turns}\n\n"
                           f"[store]\nsynchronous = \"{args.synchronous}\"\n")
        gateway = Gateway(home).start()
        try:
            measure(gateway, model, args)
        except Exception:
            print("\n--- gateway log ---\n" + gateway.output()[-4000:])
            raise
        finally:
            gateway.stop()
            busy = len(model.requests)
        print(f"\n  the fake model answered {busy} model call(s) during the run")


def measure(gateway: Gateway, model: ScriptedModelServer, args: argparse.Namespace) -> None:
    url, pid = gateway.url, gateway.proc.pid if gateway.proc else None
    answer = model.default
    with client(url) as http:
        keys = new_chats(http, 2 * args.chats + args.senders + 1)
    one_keys, parked_keys = keys[:args.chats], keys[args.chats:2 * args.chats]
    many_keys, warm_key = keys[2 * args.chats:-1], keys[-1]

    warm = one_sender(url, [warm_key], 20)  # imports, statement caches, connection pool
    drain(url, warm.last_run)
    floor = healthz_floor(url, 200)
    report("Floor: GET /healthz, 1 client (HTTP + client overhead, no store work)", floor,
           targets=False)

    cpu = cpu_seconds(pid)
    single = one_sender(url, one_keys, args.messages)
    report(f"1 sender: {args.messages} sequential messages over {len(one_keys)} chats "
           "(their turns running in the background)", single)
    waited = drain(url, single.last_run)
    gateway_cpu(pid, cpu, len(single.latencies), waited)

    dup = duplicates(url, single.sent, args.duplicates)
    report(f"Duplicate: the same client_message_id again, 1 sender, {len(dup.latencies)} times",
           dup)

    # Diagnostic: the same sends while every turn waits on the model (holding no CPU), so the
    # figure is admission alone: HTTP + validation + the store transaction.
    release = threading.Event()
    model.default = Reply(text=answer.text, hold=release)
    parked_n = min(args.messages, args.parked)
    cpu = cpu_seconds(pid)
    parked = one_sender(url, parked_keys, parked_n)
    cpu_parked = cpu_seconds(pid)
    model.default = answer
    release.set()
    report(f"Diagnostic, 1 sender, turns parked: {parked_n} messages over {len(parked_keys)} "
           "chats while every turn waits on the model (admission alone)", parked)
    if cpu is not None and cpu_parked is not None and parked.latencies:
        print(f"  gateway CPU per admission (HTTP included): "
              f"{(cpu_parked - cpu) / len(parked.latencies) * 1e3:.2f} ms")
    drain(url, parked.last_run)

    before = store_counts(url)
    many, wall = many_senders(url, many_keys, args.per_sender, args.think)
    after = store_counts(url)
    pace = (f"each pausing 0-{2 * args.think:g} s between messages" if args.think > 0
            else "back to back")
    report(f"{len(many_keys)} senders: {args.per_sender} messages each to its own chat, "
           f"all at once, {pace} (threads, one keep-alive httpx.Client each)", many, wall)
    if many.latencies and args.think <= 0:
        per = wall / len(many.latencies) * 1000
        print(f"  closed loop: {len(many_keys)} requests always in flight, so mean latency ~= "
              f"{len(many_keys)} x {per:.2f} ms (wall per ACK) = {len(many_keys) * per:.0f} ms; "
              f"p50 <= {P50_TARGET_MS:g} ms here needs <= "
              f"{P50_TARGET_MS / len(many_keys) * 1000:.0f} us of gateway time per ACK")
    ok = "met" if many.latencies and pct(sorted(x * 1000 for x in many.latencies), 99) \
        <= P99_MANY_TARGET_MS else "MISSED"
    print(f"  target p99 <= {P99_MANY_TARGET_MS:g} ms with {len(many_keys)} senders: {ok}")
    writes, commits = after[1] - before[1], after[0] - before[0]
    if many.latencies and commits:
        print(f"  group commit: {writes} awaited writes (admissions and the turns' own) in "
              f"{commits} transactions, {writes / commits:.1f} writes per fsync; "
              f"{commits / len(many.latencies):.2f} transactions per acknowledged message")
    print("  (this phase is last: the turns still queued behind it are not waited for)")


def store_counts(url: str) -> tuple[int, int]:
    """The gateway's writer counters (transactions committed, writes in them), from /healthz."""
    store = httpx.get(f"{url}/healthz", timeout=10).json().get("store", {})
    return int(store.get("transactions", 0)), int(store.get("writes", 0))


def gateway_cpu(pid: int | None, before: float | None, messages: int, waited: float) -> None:
    after = cpu_seconds(pid)
    line = f"  (the turns behind them finished {waited:.1f} s after the last ACK"
    if before is not None and after is not None and messages:
        line += (f"; gateway CPU per message, admission and its turn: "
                 f"{(after - before) / messages * 1e3:.1f} ms")
    print(line + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=400, help="1-sender messages")
    parser.add_argument("--chats", type=int, default=20, help="chats the 1 sender spreads over")
    parser.add_argument("--senders", type=int, default=50, help="concurrent senders")
    parser.add_argument("--per-sender", type=int, default=16, help="messages per sender")
    parser.add_argument("--duplicates", type=int, default=100, help="duplicate sends timed")
    parser.add_argument("--parked", type=int, default=80,
                        help="messages of the turns-parked diagnostic")
    parser.add_argument("--think", type=float, default=0.0,
                        help="mean seconds each of the many senders pauses between messages "
                             "(default 0: back to back, a closed loop)")
    parser.add_argument("--max-turns", type=int, default=4,
                        help="[gateway] max_concurrent_turns of the gateway under test")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="[store] synchronous of the gateway under test")
    parser.add_argument("--profile", action="store_true",
                        help="also time and cProfile admission.admit in this process (no HTTP)")
    args = parser.parse_args()
    args.senders = max(1, args.senders)
    args.chats = max(1, args.chats)
    started = time.perf_counter()
    run(args)
    print(f"  finished in {time.perf_counter() - started:.0f} s; load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    if args.profile:
        profile_in_process(min(args.messages, 300), args.synchronous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
