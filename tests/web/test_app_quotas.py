"""Quotas per app (`[apps]`): jobs an app may hold and how often they fire, turns per minute,
event streams open per token, and the open files kept for the owner. Each refusal is an
envelope with a sentence naming the quota, its value and the key to raise; the owner's
requests never count against an app's quotas and are never refused by them.

Every test here fails on the code before quotas per app: nothing was refused, and the soft
limit on open files was left where the gateway was started with it."""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway, write_config
from tests.support.http import error_of
from tests.support.polling import until
from tests.support.store import db_rows

QUOTAS = """
[apps]
jobs_per_app = 3
job_fires_per_hour = 6
turns_per_minute = 3
streams_per_token = 2
"""
HEADER = "X-Hearth-Session"

server, gateway, api = module_gateway("app-quotas", QUOTAS)


def retry_after(answer: httpx.Response) -> int:
    assert "retry-after" in answer.headers, dict(answer.headers)
    return int(answer.headers["retry-after"])


def new_app(gateway: Gateway, api: Api, name: str, *allow: str) -> Api:
    """An app made by the owner over the API, and a client with its token."""
    made = api.http.post("/api/apps", json={"name": name, "permissions": list(allow)})
    assert made.status_code == 201, made.text
    return gateway.client(made.json()["token"])


def own_chat(app: Api) -> dict[str, str]:
    """A chat of the app's own, as the header its jobs are made through."""
    made = app.http.post("/api/sessions", json={})
    assert made.status_code in (200, 201), made.text
    return {HEADER: made.json()["key"]}


# ---------------------------------------------------------------- jobs


def test_a_job_past_the_apps_count_is_refused_and_the_owner_still_makes_one(
        gateway: Gateway, api: Api) -> None:
    """`jobs_per_app = 3`: the app's fourth job is 429 `quota_exceeded` (before: 201)."""
    app = new_app(gateway, api, "counter", "run_jobs", "send_messages")
    own = own_chat(app)
    for n in range(3):
        made = app.http.post("/api/jobs", headers=own,
                             json={"prompt": f"hourly {n}", "every_minutes": 60})
        assert made.status_code == 201, made.text
    fourth = app.http.post("/api/jobs", headers=own, json={"prompt": "one more",
                                                            "every_minutes": 60})
    error_of(fourth, 429, "quota_exceeded", "'counter'", "`jobs_per_app` = 3", "[apps]",
             "No job was made")
    assert len(app.http.get("/api/jobs", headers=own).json()["jobs"]) == 3
    assert api.http.post("/api/jobs", json={"prompt": "the owner's",
                                            "every_minutes": 60}).status_code == 201


def test_a_schedule_over_the_apps_fires_per_hour_is_refused_made_or_resumed(
        gateway: Gateway, api: Api) -> None:
    """`job_fires_per_hour = 6`: a schedule that would let the app's jobs fire more often is
    refused, made or resumed (before: every one was accepted)."""
    app = new_app(gateway, api, "busy-bot", "run_jobs", "send_messages")
    own = own_chat(app)

    def make(**schedule: object) -> httpx.Response:
        return app.http.post("/api/jobs", headers=own, json={"prompt": "tick", **schedule})

    error_of(make(every_minutes=5), 429, "quota_exceeded", "12 times an hour",
             "`job_fires_per_hour` = 6", "No job was made")
    quarter = make(every_minutes=15)  # 4 an hour
    assert quarter.status_code == 201, quarter.text
    error_of(make(cron="*/20 * * * *", timezone="UTC"), 429, "quota_exceeded",
             "7 times an hour")
    assert make(cron="0,30 * * * *", timezone="UTC").status_code == 201  # 4 + 2
    error_of(make(in_minutes=30), 429, "quota_exceeded", "7 times an hour")
    job = quarter.json()["id"]
    paused = app.http.patch(f"/api/jobs/{job}", headers=own, json={"enabled": False})
    assert paused.status_code == 200, paused.text
    assert make(in_minutes=30).status_code == 201  # 2 + 1 while it is paused
    resumed = app.http.patch(f"/api/jobs/{job}", headers=own, json={"enabled": True})
    error_of(resumed, 429, "quota_exceeded", "7 times an hour", f"Job #{job} was not resumed")
    assert api.http.patch(f"/api/jobs/{job}", json={"enabled": True}).status_code == 200


def test_running_an_apps_job_past_its_fires_is_429_and_a_due_fire_is_skipped_with_a_notice(
        gateway: Gateway, api: Api) -> None:
    """Six fires in the hour: the app's seventh run-now is 429 with Retry-After, the owner's
    is not refused, and the scheduler skips the job's next due fire, saying why in its chat
    (before: every run and every fire went ahead)."""
    app = new_app(gateway, api, "runner", "run_jobs", "send_messages")
    own = own_chat(app)
    made = app.http.post("/api/jobs", headers=own, json={"prompt": "go", "every_minutes": 60})
    assert made.status_code == 201, made.text
    job, chat = made.json()["id"], made.json()["session_key"]
    for _ in range(6):
        ran = app.http.post(f"/api/jobs/{job}/run", headers=own)
        assert ran.status_code == 202, ran.text
    seventh = app.http.post(f"/api/jobs/{job}/run", headers=own)
    error_of(seventh, 429, "rate_limited", "fired 6 times in the last hour",
             "`job_fires_per_hour` = 6")
    assert 3500 <= retry_after(seventh) <= 3600
    assert api.http.post(f"/api/jobs/{job}/run").status_code == 202  # the owner's
    with sqlite3.connect(gateway.home / "hearth.db", timeout=10) as conn:  # due now
        conn.execute("UPDATE jobs SET next_at = ? WHERE id = ?", (time.time() - 1, job))

    def skipped() -> bool:
        return bool(db_rows(gateway, "SELECT detail FROM audit WHERE action = 'job.skipped' "
                                     "AND session_key = ?", chat))

    until(skipped)
    reasons = [json.loads(d)["reason"] for (d,) in db_rows(
        gateway, "SELECT detail FROM audit WHERE action = 'job.skipped' AND session_key = ?",
        chat)]
    assert reasons == ["app_fires_spent"]
    notices = [m for m in api.messages(chat) if m["kind"] == "notice"
               and "did not run" in json.dumps(m)]
    assert len(notices) == 1 and "`job_fires_per_hour` = 6" in json.dumps(notices[0])
    fired = db_rows(gateway, "SELECT COUNT(*) FROM runs WHERE session_key = ? AND kind = 'job'",
                    chat)
    assert fired == [(7,)]  # six of the app's runs and the owner's: the due fire ran nothing


# ---------------------------------------------------------------- turns


def test_turns_past_the_apps_quota_per_minute_are_429_and_nothing_is_admitted(
        gateway: Gateway, api: Api) -> None:
    """`turns_per_minute = 3`: the app's fourth turn in a minute is 429 `rate_limited` with
    Retry-After, on every route that admits a turn, and admits nothing; the owner's turns go
    on (before: every turn was admitted)."""
    app = new_app(gateway, api, "chatty", "send_messages", "read_chats")
    key = own_chat(app)[HEADER]
    for n in range(3):
        sent = app.http.post(f"/api/sessions/{key}/messages", json={"text": f"hello {n}"})
        assert sent.status_code == 202, sent.text
    fourth = app.http.post(f"/api/sessions/{key}/messages", json={"text": "one too many"})
    sentence = error_of(fourth, 429, "rate_limited", "'chatty'", "`turns_per_minute` = 3",
                        "[apps]")
    assert "try again in" in sentence and 1 <= retry_after(fourth) <= 60
    for path, body in (("regenerate", {}), ("edit", {"index": 0, "text": "x"}),
                       ("fork", {"index": 0})):
        again = app.http.post(f"/api/sessions/{key}/{path}", json=body)
        error_of(again, 429, "rate_limited")
        assert retry_after(again) >= 1
    completions = app.http.post("/v1/chat/completions", json={
        "model": "hearth", "messages": [{"role": "user", "content": "hi"}]})
    assert completions.status_code == 429, completions.text
    assert completions.json()["error"]["code"] == "rate_limited" and retry_after(completions)
    said = [m for m in api.messages(key) if m["kind"] == "user"]
    assert [m["text"] for m in said] == ["hello 0", "hello 1", "hello 2"]
    assert len(db_rows(gateway, "SELECT run_id FROM runs WHERE session_key = ?", key)) == 3
    mine = api.new_chat()
    for n in range(5):
        api.send(mine, f"the owner's {n}")


# ---------------------------------------------------------------- streams


def open_stream(stack: ExitStack, client: Api, key: str) -> httpx.Response:
    return stack.enter_context(client.http.stream("GET", f"/api/sessions/{key}/events",
                                                  timeout=30))


def stream_answer(client: Api, key: str) -> httpx.Response:
    """A stream's answer, read whole when refused; one that opens is closed at once (it never
    ends by itself)."""
    with client.http.stream("GET", f"/api/sessions/{key}/events", timeout=30) as answer:
        if answer.status_code != 200:
            answer.read()
        return answer


def test_streams_past_the_per_token_quota_are_429_and_the_owners_stream_still_opens(
        gateway: Gateway, api: Api) -> None:
    """`streams_per_token = 2`: the app's third open event stream is 429 with Retry-After; the
    owner's opens; once one of the app's closes, the app may open one again (before: every
    stream opened)."""
    app = new_app(gateway, api, "watcher", "send_messages", "read_chats")
    key = own_chat(app)[HEADER]
    with ExitStack() as stack:
        first, second = open_stream(stack, app, key), open_stream(stack, app, key)
        assert first.status_code == second.status_code == 200
        third = stream_answer(app, key)
        error_of(third, 429, "quota_exceeded", "'watcher'", "2 event streams open",
                 "`streams_per_token` = 2")
        assert retry_after(third) >= 1
        assert open_stream(stack, api, key).status_code == 200  # the owner's
        first.close()

        until(lambda: stream_answer(app, key).status_code == 200)

    def both_again() -> bool:
        with ExitStack() as again:
            return all(open_stream(again, app, key).status_code == 200 for _ in range(2))

    until(both_again)  # all closed: none is counted any more


# ---------------------------------------------------------------- open files


class LimitedGateway(Gateway):
    """`hearth gateway` in a subprocess started with a low soft limit on open files."""

    def __init__(self, home: Path, soft: int, hard: int) -> None:
        super().__init__(home)
        self.limits = (soft, hard)

    def start(self, wait: bool = True) -> Gateway:
        limits = self.limits
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hearth", "gateway", "--port", str(self.port)],
            env=self.env(), stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limits))
        if wait:
            self.wait_ready()
        return self


def open_files_limit(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files line")


@pytest.fixture
def limited(home: Path, model_server: ScriptedModelServer) -> Iterator[LimitedGateway]:
    """A gateway started with soft 256 and a hard limit its reserve covers whole, so every
    request of an app falls inside the reserve while the owner's are served."""
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096)
    write_config(home, model_server.openai_base_url, f"[apps]\nfd_reserve = {hard}\n")
    started = LimitedGateway(home, 256, hard)
    try:
        yield started.start()  # type: ignore[misc]
    finally:
        started.kill()


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="needs Linux's /proc")
def test_the_soft_limit_is_raised_at_start_and_the_reserve_refuses_an_app_not_the_owner(
        limited: LimitedGateway) -> None:
    """Started with soft 256, the gateway raises it to the hard limit; with open files inside
    `fd_reserve`, an app's request and its new stream are 503 `gateway_busy` with Retry-After
    while the owner and /healthz are served (before: soft stayed 256 and the app was served)."""
    assert limited.proc is not None
    hard = limited.limits[1]
    assert open_files_limit(limited.proc.pid) == (hard, hard)
    owner = limited.client()
    app = new_app(limited, owner, "greedy", "read_chats", "send_messages")
    refused = app.http.get("/api/sessions")
    error_of(refused, 503, "gateway_busy", "'greedy'", "`fd_reserve`", "[apps]")
    assert retry_after(refused) >= 1
    key = owner.new_chat()
    error_of(stream_answer(app, key), 503, "gateway_busy")
    assert owner.http.get("/api/sessions").status_code == 200
    assert httpx.get(f"{limited.url}/healthz").status_code == 200
    with owner.http.stream("GET", f"/api/sessions/{key}/events") as stream:
        assert stream.status_code == 200


def test_the_reserve_is_decided_on_the_count_and_the_soft_limit() -> None:
    """The decision alone, on small fake counts (before: there was none)."""
    from hearth.web.http.descriptors import in_reserve

    assert in_reserve(900, 1024, 128) and in_reserve(896, 1024, 128)
    assert not in_reserve(895, 1024, 128) and not in_reserve(10, 1024, 0)
    assert not in_reserve(None, 1024, 128)  # unknown: never refused
    assert not in_reserve(10**6, resource.RLIM_INFINITY, 128)


def test_an_apps_turn_window_slides_and_a_stream_is_released_once() -> None:
    """The quota object alone, on a fake clock (before: there was none)."""
    from hearth.errors import Limited
    from hearth.web.http.quotas import AppQuotas

    now = [1000.0]
    quotas = AppQuotas(clock=lambda: now[0])
    for _ in range(2):
        quotas.take_turn("a", 2)
    with pytest.raises(Limited) as refused:
        quotas.take_turn("a", 2)
    assert refused.value.retry_after == 60
    quotas.take_turn("b", 2)  # another app's window is its own
    now[0] += 60.0
    quotas.take_turn("a", 2)
    release = quotas.open_stream("a", 1)
    with pytest.raises(Limited):
        quotas.open_stream("a", 1)
    release()
    release()
    assert quotas.streams["a"] == 0
    quotas.open_stream("a", 1)


def test_a_schedules_busiest_hour() -> None:
    """How many times a schedule may fire in an hour (before: nothing counted it)."""
    from hearth.engine.background.app_quotas import peak_per_hour

    assert peak_per_hour(60, None) == 60 and peak_per_hour(420, None) == 9
    assert peak_per_hour(3600 * 24, None) == 1 and peak_per_hour(None, None) == 1
    assert peak_per_hour(None, "* * * * *") == 60 and peak_per_hour(None, "*/5 9 * * *") == 12
    assert peak_per_hour(None, "0 9 * * 1-5") == 1 and peak_per_hour(None, "@hourly") == 1
