"""`GET /metrics` and `GET /api/status` over HTTP against a real gateway: the counters move
as a turn runs, the gauges say what runs and waits, the token (the gateway's, or the metrics
token alone) is required and a refusal is never the sign-in page, and nothing of a chat (its
words, title or key) is ever in either."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import httpx

from hearth import __version__
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.apps import app_token
from tests.support.http import error_of
from tests.support.metrics import scrape
from tests.support.polling import until

METRICS_TOKEN = "scrape-" + "m" * 24


def test_the_counters_move_as_a_turn_runs(gateway: Gateway,
                                          model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    before = scrape(api.http)
    model_server.push(Reply(tool_calls=[Call("read_file", {"path": "missing.txt"})],
                            usage=(11, 3)),
                      Reply(text="Nothing there.", usage=(20, 4)))
    key = api.new_chat()
    api.wait(api.send(key, "read it")["run_id"])
    after = scrape(api.http)

    def moved(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert after.families["hearth_turns_ended"] == "counter"
    assert after.families["hearth_turn_seconds"] == "histogram"
    assert moved("hearth_turns_ended_total", ending="complete", outcome="complete") == 1
    assert moved("hearth_turns_ended_total") == 1  # nothing else ended
    assert moved("hearth_model_calls_total", model="fake", purpose="turn", outcome="ok") == 2
    assert moved("hearth_model_tokens_total", model="fake", direction="in") >= 31
    assert moved("hearth_model_tokens_total", model="fake", direction="out") >= 7
    # the file is missing: the gate allowed the read, the ledger says it failed
    assert moved("hearth_tool_calls_total", tool="read_file", decision="allowed",
                 status="failed") == 1
    assert moved("hearth_tool_calls_total") == 1
    assert moved("hearth_admission_seconds_count") == 1
    assert moved("hearth_turn_seconds_count") == 1
    assert after.value("hearth_turn_seconds_bucket", le="+Inf") == after.total(
        "hearth_turn_seconds_count")
    assert moved("hearth_store_commit_seconds_count") >= 3  # admitted, the call, the ending
    assert after.value("hearth_info", version=__version__, db_engine="sqlite") == 1
    assert after.value("hearth_turns_running") == 0
    assert after.value("hearth_model_breaker_state", model="fake", state="closed") == 1
    assert after.value("hearth_model_breaker_state", model="fake", state="open") == 0
    assert after.value("hearth_deliveries", state="failed") == 0  # shown, though none
    assert "process_resident_memory_bytes" in after.text


def test_the_gauges_say_what_runs_and_what_waits(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory("[gateway]\nmax_concurrent_turns = 1\n")
    api = gateway.client()
    release, started = threading.Event(), threading.Event()
    model_server.push(Reply(text="Late.", hold=release, started=started))
    first, second, third = api.new_chat(), api.new_chat(), api.new_chat()
    running = api.send(first, "hold on")["run_id"]
    assert started.wait(10)
    waiting = [api.send(second, "one")["run_id"], api.send(second, "two")["run_id"],
               api.send(third, "three")["run_id"]]  # one turn at once: these wait
    scraped = scrape(api.http)
    assert scraped.value("hearth_turns_running") == 1
    assert scraped.value("hearth_turns_queued") == 3
    assert scraped.value("hearth_lanes_queued") == 2
    assert scraped.value("hearth_lane_queue_depth_max") == 2
    release.set()
    for run_id in (running, *waiting):
        api.wait(run_id)
    assert until(lambda: scrape(api.http).value("hearth_turns_queued") == 0)


def test_metrics_and_status_need_a_token_and_never_send_to_sign_in(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, follow_redirects=False) as anonymous:
        for path in ("/metrics", "/api/status"):
            error_of(anonymous.get(path), 401, "unauthorized")
            as_browser = anonymous.get(path, headers={"Accept": "text/html,*/*"})
            error_of(as_browser, 401, "unauthorized")  # the envelope, not a 303 to /login
            error_of(anonymous.get(path, headers={"Authorization": "Bearer not-the-token"}),
                     401, "unauthorized")
        assert anonymous.get("/chats").status_code == 303  # a page still sends to sign in


def test_the_metrics_token_opens_metrics_alone(
        gateway_factory: Callable[..., Gateway]) -> None:
    gateway = gateway_factory(env={"HEARTH_METRICS_TOKEN": METRICS_TOKEN})
    scraper = gateway.client(METRICS_TOKEN)
    assert scrape(scraper.http).value("hearth_turns_running") == 0
    for path in ("/api/status", "/api/sessions", "/api/usage"):
        error_of(scraper.http.get(path), 401, "unauthorized")
    error_of(scraper.http.post("/api/sessions", json={}), 401, "unauthorized")
    assert scrape(gateway.client().http).value("hearth_turns_running") == 0  # the owner's too


def test_an_apps_token_is_refused_the_gateways_figures(gateway: Gateway) -> None:
    admin = gateway.client(app_token(gateway.client(), "grafana", "admin"))
    error_of(admin.http.get("/metrics"), 403, "app_scope")
    error_of(admin.http.get("/api/status"), 403, "app_scope")


def test_no_chats_words_title_or_key_reach_the_figures(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    mark = uuid.uuid4().hex[:10]
    word, title, name = f"zyxword{mark}", f"Zyxtitle{mark}", f"zyxname{mark}"
    model_server.push(Reply(text=f"You said {word}."), Reply(text=f"Again {word}."))
    named = api.new_chat(name=name)
    assert api.http.patch(f"/api/sessions/{named}", json={"title": title}).status_code == 200
    api.wait(api.send(named, f"remember {word}")["run_id"])
    hidden = api.new_chat(memory_mode="incognito")
    api.wait(api.send(hidden, f"quietly {word}")["run_id"])
    shown = scrape(api.http).text + api.http.get("/api/status").text
    for secret in (word, title, name, named, hidden, mark):
        assert secret.lower() not in shown.lower(), secret
    assert scrape(api.http).total("hearth_turns_ended_total", ending="complete") == 2


def test_status_says_the_same_at_a_glance(gateway: Gateway,
                                          model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    model_server.push(Reply(text="Hello.", usage=(5, 2)))
    api.wait(api.send(api.new_chat(), "hi")["run_id"])
    status = api.http.get("/api/status").json()
    assert status["version"] == __version__ and status["db_engine"] == "sqlite"
    assert status["turns"]["ended"] == {"complete": 1}
    assert status["turns"]["running"] == 0 and status["turns"]["queued"] == 0
    assert status["turns"]["seconds"]["count"] == 1
    fake = next(model for model in status["models"] if model["model"] == "fake")
    assert fake["breaker"] == "closed" and fake["not_ok"] == 0
    assert fake["calls"] >= 1 and fake["tokens_in"] >= 5  # the title's call may add to them
    assert status["store"]["commits"] >= 2 and status["store"]["commit_seconds"]["p95"] > 0
    assert status["deliveries"] == {} and status["admission"]["count"] == 1
