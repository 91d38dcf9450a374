"""Two gateways on one PostgreSQL database (issue: several gateways on one database).

Each test starts two real gateway subprocesses, A and B, with homes of their own, the same
database, the same token and the same scripted model, with a lease of 3 s so a dead one is
found in seconds. What they must hold together: a chat's turns in order, one at a time,
whichever gateway took each message; a stream on one showing a turn run on the other; a
gateway killed mid-turn or mid-tool-call resumed once by the other, no tool run again; a job
fired once; a Telegram update handled once; an approval or a Stop given on one reaching the
turn on the other.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from hearth.faults import EXIT_CODE
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import TOKEN, Api, Gateway, write_config
from tests.support import postgres
from tests.support.fixtures import telegram_fixture  # noqa: F401 - `telegram`
from tests.support.polling import until
from tests.support.telegram import OWNER, chats, telegram_config

pytestmark = [pytest.mark.process_gateway,
              pytest.mark.skipif(postgres.unavailable() is not None,
                                 reason=postgres.unavailable() or "")]

LEASE = "[gateway]\nlease_seconds = 3\n"


@pytest.fixture
def database_url() -> str:
    """A new database on this process's throwaway cluster, migrated."""
    store = postgres.database()
    url = store.url
    store.close()
    return url


@pytest.fixture
def pair(tmp_path: Path, database_url: str, model_server: ScriptedModelServer
         ) -> Iterator[Callable[..., tuple[Gateway, Gateway]]]:
    """Start gateways A and B on the one database (`config` added to both configs)."""
    made: list[Gateway] = []

    def start(config: str = "", env_a: dict[str, str] | None = None
              ) -> tuple[Gateway, Gateway]:
        both = []
        for name, env in (("a", env_a or {}), ("b", {})):
            home = tmp_path / name
            write_config(home, model_server.openai_base_url, LEASE + config)
            gateway = Gateway(home, {"HEARTH_DATABASE_URL": database_url, **env})
            made.append(gateway)
            both.append(gateway.start())
        return both[0], both[1]

    yield start
    for gateway in made:
        gateway.kill()


def rows(url: str, sql: str, **params: Any) -> list[Any]:
    """Read the database as any other program would."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params))
    finally:
        engine.dispose()


def finals(api: Api, key: str) -> list[dict[str, Any]]:
    return [m for m in api.messages(key) if m["kind"] == "assistant"
            and not m["meta"].get("partial")]


def test_messages_sent_to_both_are_answered_in_order_one_turn_at_a_time(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        database_url: str) -> None:
    model_server.responder = lambda request: Reply(
        text=f"answer to {request.messages[-1]['content']}", chunks=3, delay=0.05)
    a, b = pair()
    key = a.client().new_chat()
    sent = [f"message {n}" for n in range(6)]
    runs = [(a if n % 2 == 0 else b).client().send(key, said)["run_id"]
            for n, said in enumerate(sent)]
    for run_id in runs:
        assert b.client().wait(run_id, timeout=30)["status"] == "complete"
    said = [m["text"] for m in finals(a.client(), key)]
    assert said == [f"answer to {text}" for text in sent], said
    spans = rows(database_url, "SELECT started_at, ended_at FROM runs WHERE session_key = :k "
                 "ORDER BY id", k=key)
    for (_, ended), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= ended, "two turns of one chat ran at once"


def test_a_stream_on_one_gateway_shows_a_turn_run_on_the_other(
        pair: Callable[..., tuple[Gateway, Gateway]],
        model_server: ScriptedModelServer) -> None:
    a, b = pair()
    key = a.client().new_chat()
    hold = threading.Event()
    model_server.push(Reply(text="streamed across the replicas", chunks=5, delay=0.05,
                            hold=hold))
    frames: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: frames.extend(b.client().frames(
        key, 0, lambda frame: frame["type"] == "done", timeout=30)))
    reader.start()
    time.sleep(0.5)  # B's stream is open before the turn starts
    a.client().send(key, "stream it")
    hold.set()
    reader.join(35)
    kinds = [frame["type"] for frame in frames]
    assert "delta" in kinds, kinds
    streamed = "".join(frame["text"] for frame in frames if frame["type"] == "delta")
    assert streamed == "streamed across the replicas"
    assert frames[-1]["answer"] == "streamed across the replicas"


def test_a_gateway_killed_mid_turn_is_resumed_once_by_the_other(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        database_url: str) -> None:
    a, b = pair()
    api = a.client()
    key = api.new_chat()
    hold = threading.Event()
    model_server.push(Reply(text="never finished", chunks=4, delay=0.05, hold=hold))
    model_server.default = Reply(text="Resumed by the other gateway.")
    run_id = api.send(key, "a long question")["run_id"]
    assert model_server.wait_for_requests(1, timeout=10)
    a.kill()  # kill -9, mid-turn
    run = b.client().wait(run_id, timeout=30)
    assert run["status"] == "complete" and run["recovery_attempts"] == 1
    answers = finals(b.client(), key)
    assert [m["text"] for m in answers] == ["Resumed by the other gateway."]
    [(replica,)] = rows(database_url, "SELECT replica FROM runs WHERE run_id = :r", r=run_id)
    assert [(replica,)] == rows(database_url, "SELECT id FROM replicas")  # B ran it; A is gone
    hold.set()


@pytest.mark.parametrize("chat", ["named", None], ids=["named", "stateless"])
def test_a_v1_request_retried_after_its_gateway_died_is_admitted_once(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        database_url: str, chat: str | None) -> None:
    """The client sends its request again, with its Idempotency-Key, to the gateway still up:
    it is answered by the run the dead one admitted, resumed there once; no second message."""
    a, b = pair()
    hold = threading.Event()
    model_server.push(Reply(text="never finished", hold=hold))
    model_server.default = Reply(text="Resumed by the other gateway.")
    body = {"model": "hearth", "messages": [{"role": "user", "content": "ask across"}]}
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": str(uuid.uuid4()),
               **({"X-Hearth-Session": chat} if chat else {})}
    first = threading.Thread(target=lambda: _lost(a.url, body, headers), daemon=True)
    first.start()
    assert model_server.wait_for_requests(1, timeout=10)
    a.kill()  # kill -9, mid-turn: the client's answer is lost
    retried = httpx.post(b.url + "/v1/chat/completions", json=body, headers=headers,
                         timeout=60)
    hold.set()
    assert retried.status_code == 200, retried.text
    assert retried.json()["choices"][0]["message"]["content"] == "Resumed by the other gateway."
    run_id = retried.headers["x-hearth-run"]
    if chat:  # (a stateless request's run is forgotten with its chat)
        assert rows(database_url, "SELECT recovery_attempts FROM runs WHERE run_id = :r",
                    r=run_id) == [(1,)]
    asked = [call for call in model_server.requests
             if call.messages and call.messages[-1].get("content") == "ask across"]
    assert len(asked) == 2  # A's call, and B's once it resumed the run; never a second turn
    said = rows(database_url, "SELECT count(*) FROM transcript_events WHERE kind = 'user'")
    assert said == [(1 if chat else 0,)]  # (the stateless request's chat is forgotten)


def _lost(url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    """A request whose gateway dies before it answers."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def test_a_gateway_killed_mid_tool_call_never_has_it_run_again(
        pair: Callable[..., tuple[Gateway, Gateway]],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "echo w >> writes.log"})]))
    model_server.default = Reply(text="Told it may not have run.")
    a, b = pair(env_a={"HEARTH_CRASH_AT": "tool_ran"})
    key = a.client().new_chat()
    run_id = a.client().send(key, "write it")["run_id"]
    until(lambda: a.proc is not None and a.proc.poll() is not None, timeout=20,
          what="A dying after the tool ran")
    assert a.proc is not None and a.proc.returncode == EXIT_CODE, a.output()
    run = b.client().wait(run_id, timeout=30)
    assert run["status"] == "complete"
    calls = b.client().http.get(f"/api/runs/{run_id}").json()["tool_calls"]
    assert [call["status"] for call in calls] == ["unknown"]
    assert (a.home / "workspace" / "writes.log").read_text() == "w\n"
    assert not (b.home / "workspace" / "writes.log").exists(), "the call ran again on B"


def test_a_job_fires_once_across_the_gateways(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        database_url: str) -> None:
    model_server.default = Reply(text="Job done.")
    a, b = pair()
    at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
    made = b.client().http.post("/api/jobs", json={"prompt": "the daily check", "at": at})
    assert made.status_code in (200, 201), made.text
    until(lambda: rows(database_url, "SELECT status FROM runs WHERE kind = 'job'")
          and rows(database_url, "SELECT status FROM runs WHERE kind = 'job'")[0][0]
          == "complete", timeout=30, what="the job's turn")
    time.sleep(3)  # a second firing would have come by now
    assert len(rows(database_url, "SELECT run_id FROM runs WHERE kind = 'job'")) == 1


def test_a_telegram_update_is_handled_once(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        telegram: FakeTelegram) -> None:
    model_server.default = Reply(text="Hello from one gateway.")
    a, b = pair(telegram_config(telegram, poll_seconds=1))
    telegram.push_message(OWNER, OWNER, "hello there")
    [chat] = until(lambda: chats(a.client()), timeout=20, what="the thread's chat")
    until(lambda: telegram.sent(OWNER), timeout=20, what="the reply")
    time.sleep(3)  # both gateways had time to poll again
    users = [m for m in a.client().messages(chat["key"]) if m["kind"] == "user"]
    assert len(users) == 1
    assert [m.plain for m in telegram.sent(OWNER)] == ["Hello from one gateway."]


def test_an_approval_answered_on_one_gateway_wakes_the_turn_on_the_other(
        pair: Callable[..., tuple[Gateway, Gateway]],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "n.txt",
                                                            "content": "hi"})]),
                      Reply(text="Written."))
    a, b = pair()
    key = a.client().new_chat(trust="ask")
    run_id = a.client().send(key, "write a note")["run_id"]
    [waiting] = until(lambda: b.client().http.get("/api/approvals").json()["approvals"],
                      timeout=20, what="the approval")
    answer = b.client().http.post(f"/api/approvals/{waiting['id']}",
                                  json={"decision": "allow_once"})
    assert answer.status_code == 200, answer.text
    assert a.client().wait(run_id, timeout=20)["status"] == "complete"
    assert (a.home / "workspace" / "n.txt").read_text() == "hi"


def test_stop_on_one_gateway_ends_the_turn_running_on_the_other(
        pair: Callable[..., tuple[Gateway, Gateway]],
        model_server: ScriptedModelServer) -> None:
    hold = threading.Event()
    model_server.push(Reply(text="a very long answer", chunks=4, delay=0.05, hold=hold))
    a, b = pair()
    key = a.client().new_chat()
    run_id = a.client().send(key, "take your time")["run_id"]
    assert model_server.wait_for_requests(1, timeout=10)
    stopped = b.client().http.post(f"/api/sessions/{key}/stop")
    assert stopped.status_code == 200, stopped.text
    assert a.client().wait(run_id, timeout=20)["status"] == "stopped"
    hold.set()


def _allow(url: str, allowed: bool) -> None:
    """Let the gateway's database be connected to, or not (its connections cut)."""
    name = url.rsplit("/", 1)[1]
    admin = create_engine(url.rsplit("/", 1)[0] + "/postgres",
                          isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}'))
            if not allowed:
                conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
    finally:
        admin.dispose()


def test_a_database_lost_mid_run_answers_503_and_is_used_again_once_back(
        tmp_path: Path, database_url: str, model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Still here.")
    write_config(tmp_path / "a", model_server.openai_base_url)
    gateway = Gateway(tmp_path / "a", {"HEARTH_DATABASE_URL": database_url}).start()
    try:
        api = gateway.client()
        key = api.new_chat()
        hold = threading.Event()
        model_server.push(Reply(text="answered while the database was away", hold=hold))
        before = api.send(key, "before")["run_id"]
        assert model_server.wait_for_requests(1, timeout=10)
        _allow(database_url, False)
        try:
            for answer in (api.http.get("/api/sessions"),
                           api.http.post(f"/api/sessions/{key}/messages", json={"text": "x"})):
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "store_unavailable"
            hold.set()  # the turn in flight tries to write its answer now
            time.sleep(1)
        finally:
            _allow(database_url, True)
        ended = api.wait(before, timeout=20)
        assert (ended["status"], ended["ending"]) == ("error", "store_lost"), ended
        after = until(lambda: _sent(api, key, "after"), timeout=20, what="a send accepted")
        assert api.wait(after, timeout=20)["status"] == "complete"
        assert gateway.proc is not None and gateway.proc.poll() is None
        users = [m["text"] for m in api.messages(key) if m["kind"] == "user"]
        assert users == ["before", "after"]  # the refused message was never admitted
    finally:
        gateway.kill()


def _sent(api: Api, key: str, text_: str) -> str | None:
    answer = api.http.post(f"/api/sessions/{key}/messages",
                           json={"text": text_, "client_message_id": "after-1"})
    return str(answer.json()["run_id"]) if answer.status_code == 202 else None


def test_when_the_leader_dies_another_leads_and_fires_the_jobs(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        database_url: str) -> None:
    model_server.default = Reply(text="Fired by the new leader.")
    a, b = pair()  # A started first: A leads
    [(leader,)] = rows(database_url, "SELECT holder FROM leases WHERE name = 'leader'")
    a.kill()
    at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    made = b.client().http.post("/api/jobs", json={"prompt": "after the leader", "at": at})
    assert made.status_code in (200, 201), made.text
    until(lambda: [r for r in rows(database_url, "SELECT status FROM runs WHERE kind = 'job'")
                   if r[0] == "complete"], timeout=30, what="the job fired by B")
    [(now_leading,)] = rows(database_url, "SELECT holder FROM leases WHERE name = 'leader'")
    assert now_leading != leader


PRICED = ('[[models]]\nid = "priced"\nprovider = "openai"\nbase_url = "{url}"\n'
          'api_key = "sk-test"\nmodel = "m-priced"\nprice_in_per_mtok = 2.0\n'
          'price_out_per_mtok = 10.0\nmax_output_tokens = 500\n\n'
          '[chains]\nchat = ["priced"]\nbackground = ["fake"]\n\n'
          '[learning]\nevery_turns = 1000\n\n[limits]\nusd_per_day = 0.012\n')


def test_a_spending_limit_holds_across_the_gateways(
        pair: Callable[..., tuple[Gateway, Gateway]],
        model_server: ScriptedModelServer) -> None:
    """What A spent counts on B within seconds (before: each gateway held the limit to its
    own calls, so two could spend twice the limit). An answer costs $0.007 of $0.012 a day,
    and the next call could cost $0.005 more: refused wherever it is asked for."""
    model_server.default = Reply(text="A title")  # the chores, on the unpriced model
    model_server.push(Reply(text="Paid for on A.", usage=(1000, 500)))
    a, b = pair(PRICED.format(url=model_server.openai_base_url))
    api_a, api_b = a.client(), b.client()
    spent = api_a.wait(api_a.send(api_a.new_chat(), "spend")["run_id"])
    assert spent["status"] == "complete"

    def b_counts_it() -> bool:
        standing = api_b.http.get("/api/limits").json()["standing"]
        return any(s["kind"] == "all" and s["period"] == "day" and s["spent_usd"] >= 0.007
                   for s in standing)

    until(b_counts_it, timeout=20, what="B counting what A spent")
    paid = [r for r in model_server.requests if r.model == "m-priced"]
    refused = api_b.wait(api_b.send(api_b.new_chat(), "spend again")["run_id"])
    assert refused["status"] == "error" and refused["ending"] == "spending_limit", refused
    assert [r for r in model_server.requests if r.model == "m-priced"] == paid  # none sent


def test_a_retry_asked_of_a_gateway_that_does_not_lead_is_sent_by_the_leader(
        pair: Callable[..., tuple[Gateway, Gateway]], model_server: ScriptedModelServer,
        telegram: FakeTelegram) -> None:
    """The channels run on the leader (A); B's Retry wakes A's sender through the relay.
    Before: the row was owed again, and sat until something else woke A's sender."""
    model_server.default = Reply(text="Here is your answer.")
    telegram.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    a, b = pair(telegram_config(telegram, poll_seconds=1))
    telegram.push_message(OWNER, OWNER, "hello bot")
    desk = b.client().http
    [failed] = until(lambda: desk.get("/api/desk").json()["deliveries"], timeout=20,
                     what="the refused reply on the desk")
    assert desk.post(f"/api/deliveries/{failed['id']}/retry").status_code == 202
    [sent] = telegram.wait_sent(1, chat_id=OWNER, timeout=10)
    assert sent.plain == "Here is your answer."
