"""What each chat channel adds to a turn, and whether a Telegram flood is answered once and in
order.

A real `hearth gateway` subprocess (tests.gateway.Gateway, its own temp HEARTH_HOME) polls the
fake Telegram Bot API (tests.fakes.telegram_server, in this process) and answers from the
scripted model server (tests.fakes.model_server), which answers at once.

Each thread is a person: they send a message, wait for the bot's reply, and send the next.
A message's latency runs from its push into the fake Bot API to the reply's first outbound
chunk arriving there (`sendMessage`). The model's own time is measured apart, with the
official `openai` client streaming the same scripted answer; the *added* latency is the
difference of the medians.

Phases:
  * one thread, `--warm` messages: the unloaded latency; then as many turns sent on the
    HTTP API and waited for (the same gateway, no channel): the channel's own share is the
    difference of the medians;
  * the same for Matrix (a message event on the fake homeserver to the bot's event sent),
    Slack (a signed DM event POSTed to the gateway to the answer in place of its placeholder)
    and email (a mail handed to the SMTP listener to the answer at the relay), each against
    its fake (tests/fakes/), on the same gateway;
  * `--threads` threads x `--per-thread` messages at once (1,000 by default over 50 threads):
    latency, throughput, and the checks: every message admitted once and answered once, each
    thread's messages answered in the order sent (each message's run answered once, the
    answers in the messages' order, and as many replies sent to the thread).

Target (issue 16): p50 added latency <= 20 ms over the scripted model's own time.
A benchmark, not a test: it prints figures and verdicts and exits 0 whatever they are.

    .venv/bin/python bench/channels.py [--threads 50] [--per-thread 20] [--warm 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.fakes.mail_server import FakeRelay, free_port, mail, send  # noqa: E402
from tests.fakes.matrix_server import (  # noqa: E402
    BOT,
    TOKEN as MATRIX_TOKEN,  # noqa: E402
    FakeMatrix,
)
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.fakes.slack_server import (  # noqa: E402
    SECRET,
    TOKEN as SLACK_TOKEN,  # noqa: E402
    FakeSlack,
    dm,
)
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.gateway import TOKEN, Gateway, write_config  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side."
FIRST_THREAD = 5000


def _summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"p50 {statistics.median(ordered):.1f} ms  p95 {p95:.1f} ms  (n={len(ordered)})"


def person(fake: FakeTelegram, thread: int, count: int, out: list[float]) -> None:
    """Send `count` messages one after another, each after the reply to the one before."""
    for n in range(count):
        pushed = time.monotonic()
        fake.push_message(thread, thread, f"message {n} from {thread}")
        reply = fake.wait_sent(n + 1, chat_id=thread, timeout=120)[n]
        out.append((reply.time - pushed) * 1000)


def people(fake: FakeTelegram, threads: int, per_thread: int) -> tuple[list[float], float]:
    samples: list[float] = []
    workers = [threading.Thread(target=person, args=(fake, FIRST_THREAD + t, per_thread,
                                                     samples)) for t in range(threads)]
    began = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return samples, time.monotonic() - began


def model_own_time(model: ScriptedModelServer, calls: int) -> list[float]:
    """The scripted model's own time for one streamed answer, through the official client."""
    from openai import OpenAI

    client = OpenAI(base_url=model.openai_base_url, api_key="sk-test")
    samples = []
    for _ in range(calls):
        began = time.monotonic()
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True)
        for _chunk in stream:
            pass
        samples.append((time.monotonic() - began) * 1000)
    return samples


def dashboard_turns(url: str, count: int) -> list[float]:
    """The same turn sent from the dashboard's API (send, then wait for its end): what the
    gateway's turn costs without a channel, for the channel's own share."""
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=60)
    key = http.post("/api/sessions", json={}).json()["key"]
    samples = []
    for n in range(count):
        began = time.monotonic()
        run = http.post(f"/api/sessions/{key}/messages", json={"text": f"dash {n}"}).json()
        http.get(f"/api/runs/{run['run_id']}/wait", params={"timeout": 60})
        samples.append((time.monotonic() - began) * 1000)
    return samples


@dataclass
class Others:
    """The other channels' fakes, and the listener's port for mail."""

    matrix: FakeMatrix
    slack: FakeSlack
    relay: FakeRelay
    mail_port: int

    def config(self) -> str:
        return (f'[channels.matrix]\nhomeserver = "{self.matrix.url}"\nuser_id = "{BOT}"\n'
                f'access_token = "{MATRIX_TOKEN}"\nowner_ids = ["@ann:b"]\n'
                "poll_timeout_seconds = 25\n\n"
                f'[channels.slack]\nbot_token = "{SLACK_TOKEN}"\nsigning_secret = "{SECRET}"\n'
                f'owner_ids = ["UANN"]\napi_url = "{self.slack.api_url}"\n\n'
                '[channels.email]\naddress = "bot@example.org"\nowner_addresses = '
                f'["ann@example.org"]\nlisten_port = {self.mail_port}\nsmtp_host = '
                f'"127.0.0.1"\nsmtp_port = {self.relay.port}\nsmtp_starttls = false\n')


def matrix_turns(matrix: FakeMatrix, count: int) -> list[float]:
    room = matrix.room("!bench:b", ["@ann:b"])
    while len(matrix.syncs) < 2:  # the channel syncs from the present
        time.sleep(0.05)
    samples = []
    for n in range(count):
        began = time.monotonic()
        matrix.message(room, "@ann:b", f"matrix {n}")
        matrix.wait_sent(room, n + 1, timeout=60)
        samples.append((time.monotonic() - began) * 1000)
    return samples


def slack_turns(slack: FakeSlack, url: str, count: int) -> list[float]:
    samples = []
    for n in range(count):
        began = time.monotonic()
        slack.deliver(f"{url}/channels/slack/events", dm("UANN", f"slack {n}"))
        slack.wait_for(lambda n=n: sum(p.now == ANSWER for p in slack.in_channel("DUANN"))
                       > n, timeout=60)
        samples.append((time.monotonic() - began) * 1000)
    return samples


def mail_turns(others: Others, count: int) -> list[float]:
    samples = []
    for n in range(count):
        began = time.monotonic()
        send(others.mail_port, mail("ann@example.org", "bot@example.org", f"mail {n}",
                                    message_id=f"<bench-{n}@example.org>"), "bot@example.org")
        others.relay.wait(n + 1, timeout=60)
        samples.append((time.monotonic() - began) * 1000)
    return samples


def check(url: str, fake: FakeTelegram, threads: int, per_thread: int) -> list[str]:
    """What is wrong with what the flood left (nothing: all answered once, in order)."""
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=60)
    chats = http.get("/api/sessions", params={"limit": 200}).json()["sessions"]
    problems = []
    for chat in chats:
        said = http.get(f"/api/sessions/{chat['key']}", params={"limit": 1000}).json()
        source = said["messages"][0]["source"]
        thread = source["thread"]
        if source["channel"] != "telegram" or thread is None or int(thread) < FIRST_THREAD:
            continue
        users = [m for m in said["messages"] if m["kind"] == "user"]
        if [m["text"] for m in users] != [f"message {n} from {thread}" for n in range(per_thread)]:
            problems.append(f"thread {thread}: messages not admitted once, in order")
        answers = [m["run_id"] for m in said["messages"] if m["kind"] == "assistant"]
        if answers != [m["run_id"] for m in users]:
            problems.append(f"thread {thread}: not each answered once, in order")
        if len(fake.sent(int(thread))) != per_thread:
            problems.append(f"thread {thread}: {len(fake.sent(int(thread)))} replies sent")
    return problems


def measure(args: argparse.Namespace) -> None:
    with ScriptedModelServer() as model, FakeTelegram() as fake, FakeMatrix() as matrix, \
            FakeSlack() as slack, FakeRelay() as relay:
        others = Others(matrix, slack, relay, free_port())
        model.default = Reply(text=ANSWER)
        own = model_own_time(model, 50)
        home = Path(tempfile.mkdtemp(prefix="hearth-bench-channels-")) / "home"
        write_config(home, model.openai_base_url,
                     f'[channels.telegram]\ntoken = "{fake.token}"\nbase_url = '
                     f'"{fake.base_url}"\nowner_ids = [{FIRST_THREAD}]\n'
                     "poll_timeout_seconds = 25\n\n" + others.config())
        gateway = Gateway(home).start()
        try:
            person(fake, 1, 3, [])  # warm up: the first turn imports what turns use
            warm: list[float] = []
            person(fake, 2, args.warm, warm)
            dashboard = dashboard_turns(gateway.url, args.warm)
            each = {"Matrix": matrix_turns(matrix, args.warm),
                    "Slack": slack_turns(slack, gateway.url, args.warm),
                    "email": mail_turns(others, args.warm)}
            flood, took = people(fake, args.threads, args.per_thread)
            problems = check(gateway.url, fake, args.threads, args.per_thread)
        finally:
            gateway.stop()
    report(own, (warm, dashboard), flood, took, problems, args)
    for name, samples in each.items():
        print(f"{name + ', message to reply':<30}{_summary(samples)}")
        print(f"  its own share over the API  p50 "
              f"{statistics.median(samples) - statistics.median(dashboard):.1f} ms")


def report(own: list[float], single: tuple[list[float], list[float]], flood: list[float],
           took: float, problems: list[str], args: argparse.Namespace) -> None:
    model_p50 = statistics.median(own)
    warm, dashboard = single
    print(f"scripted model's own time     {_summary(own)}")
    print(f"one thread, update to reply   {_summary(warm)}")
    print(f"  added over the model        p50 {statistics.median(warm) - model_p50:.1f} ms")
    print(f"the same turn from the API    {_summary(dashboard)}")
    print(f"  the channel's own share     p50 "
          f"{statistics.median(warm) - statistics.median(dashboard):.1f} ms")
    total = args.threads * args.per_thread
    print(f"{args.threads} threads x {args.per_thread} messages  {_summary(flood)}")
    added = statistics.median(flood) - model_p50
    print(f"  added over the model        p50 {added:.1f} ms "
          f"({statistics.median(flood) / model_p50:.1f}x the model's own time)")
    print(f"  throughput                  {total / took:.0f} messages/s ({took:.1f} s)")
    print(f"  answered once, in order     {'yes' if not problems else 'NO'}")
    for problem in problems[:10]:
        print(f"    {problem}")
    met = added <= 20.0
    print(f"target p50 added <= 20 ms     {'met' if met else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--per-thread", type=int, default=20)
    parser.add_argument("--warm", type=int, default=30)
    measure(parser.parse_args())


if __name__ == "__main__":
    main()
