"""The per-call record: every model call (a turn's steps, a chore's, a Settings Test) writes
one row of `model_calls` through the call guard, with its purpose, outcome, tokens, cost
(priced by the model that answered; NULL when it has no price), duration, and the chat's key
only for a persistent chat, never any text; the Usage page and API add up the same rows.
In-process, real turns against the scripted model server."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from hearth.config import ModelConfig
from hearth.models import guard
from hearth.models.calls import CallRecorder, outcome_of
from hearth.models.probe import probe
from hearth.models.registry import build_provider
from hearth.models.types import Completed, Message, ModelError, ModelRequest
from hearth.privacy import reach
from hearth.privacy.scope import as_work_of
from hearth.store.db import Database
from hearth.store.schema import model_calls
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.dashboard import api_chat, api_turn, dashboard, store_of
from tests.support.models import priced_config
from tests.support.store import migrated

SECRET = "my hidden passphrase zebra"


@pytest.fixture
def client(home: Path, model_server: ScriptedModelServer) -> Iterator[TestClient]:
    """The dashboard with the priced and the plain model, signed in, sending the CSRF token."""
    with dashboard(home, priced_config(model_server), csrf=True) as test_client:
        yield test_client


CHORES = ("title", "learning", "compaction", "summary")  # run after a turn, on their own


def _rows(db: Database, count: int | None = None, chores: bool = False) -> list[dict[str, Any]]:
    """The rows (not the chores' unless asked: they run beside the turns), waiting (a few
    seconds at most) until there are `count` of them."""
    deadline = time.monotonic() + 10
    while True:
        query = select(model_calls).order_by(model_calls.c.id)
        if not chores:
            query = query.where(model_calls.c.purpose.not_in(CHORES))
        with db.read() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        if count is None or len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def test_a_turn_writes_one_row_per_model_call(
        client: TestClient, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    model_server.push(Reply(tool_calls=[Call("list_dir", {"path": "."})], usage=(100, 20)),
                      Reply(text="Here is what I found.", usage=(300, 40)))
    key = api_chat(client)
    assert api_turn(client, key, f"list it, {SECRET}")["status"] == "complete"
    rows = _rows(store_of(client), 2)
    assert [(r["purpose"], r["outcome"], r["model_id"], r["provider"]) for r in rows] == [
        ("turn", "ok", "priced", "openai")] * 2
    assert [(r["tokens_in"], r["tokens_out"]) for r in rows] == [(100, 20), (300, 40)]
    assert rows[0]["cost_usd"] == pytest.approx((100 * 2.0 + 20 * 10.0) / 1e6)
    assert rows[1]["cost_usd"] == pytest.approx((300 * 2.0 + 40 * 10.0) / 1e6)
    assert all(r["session_key"] == key and r["calls"] == 1 for r in rows)
    assert all(r["duration_ms"] >= 0 for r in rows)
    assert SECRET not in repr(rows) and "found" not in repr(rows)


def test_deleting_a_chat_keeps_its_calls_figures_but_not_its_name(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Noted.", usage=(10, 2)))
    key = api_chat(client, name="my-secret-project")
    assert api_turn(client, key, "hello")["status"] == "complete"
    assert [r["session_key"] for r in _rows(store_of(client), 1)] == [key]
    assert client.delete(f"/api/sessions/{key}").status_code == 200
    rows = _rows(store_of(client))
    assert [(r["session_key"], r["tokens_in"]) for r in rows] == [(None, 10)]
    assert {r["session_key"] for r in _rows(store_of(client), chores=True)} == {None}


def test_a_failed_call_is_recorded_failed(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(*[Reply(status=500) for _ in range(3)])
    ended = api_turn(client, api_chat(client), "hello")
    assert ended["status"] == "error"
    rows = _rows(store_of(client), 1)
    assert rows and {r["outcome"] for r in rows} == {"failed"}
    assert all(r["tokens_in"] == 0 and r["purpose"] == "turn" for r in rows)
    assert all(r["cost_usd"] == 0.0 for r in rows)  # priced, and nothing was used


def test_a_stream_cut_mid_answer_is_recorded_cut_off(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="one two three four five six", chunks=6, cut_after=3))
    api_turn(client, api_chat(client), "hello")
    rows = _rows(store_of(client), 1)
    assert [r["outcome"] for r in rows][:1] == ["cut_off"]
    # no usage was reported: an estimate, said so, never $0 (tests/engine/test_unreported_usage)
    assert rows[0]["estimated"] and rows[0]["tokens_in"] > 0 and rows[0]["cost_usd"] > 0


def test_an_incognito_chats_call_keeps_no_chat_and_no_text(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    for mode in ("incognito", "temporary"):
        model_server.push(Reply(text=f"the zebra answer {mode}", usage=(11, 3)))
        key = api_chat(client, memory_mode=mode)
        assert api_turn(client, key, SECRET)["status"] == "complete"
    rows = _rows(store_of(client), 2)
    assert [r["session_key"] for r in rows] == [None, None]
    assert "zebra" not in repr(rows) and "passphrase" not in repr(rows)


def test_an_unpriced_models_call_has_no_cost_and_reads_unpriced(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="plain answer", usage=(40, 7)), model="m-plain")
    config = priced_config(model_server, background=["plain"])
    with dashboard(tmp_path / "home", config, csrf=True) as client:
        assert api_turn(client, api_chat(client, model="plain"), "hi")["status"] == "complete"
        [row] = _rows(store_of(client), 1)
        assert row["model_id"] == "plain" and row["cost_usd"] is None
        page = client.get("/usage").text  # its chores' calls on the unpriced model too
    purposes = page.split("<caption>By purpose</caption>", 1)[1].split("</table>", 1)[0]
    assert "unpriced" in purposes and "$0" not in page


def test_the_settings_test_is_recorded_as_a_probe(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="OK", usage=(5, 1)))
    tested = client.post("/settings/models/priced/test",
                         data={"csrf": client.headers["X-CSRF-Token"]})
    assert tested.status_code == 200
    [row] = _rows(store_of(client), 1)
    assert (row["purpose"], row["outcome"], row["session_key"]) == ("probe", "ok", None)
    assert row["cost_usd"] == pytest.approx((5 * 2.0 + 1 * 10.0) / 1e6)


def test_a_learning_chores_call_is_recorded_as_learning(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    config = priced_config(model_server, background=["plain"])
    model_server.push(Reply(text="Noted.", usage=(30, 4)))
    for _ in range(2):  # the learning chore's answer (and the title chore's, which runs too)
        model_server.push_chore(Reply(text='{"items": []}', usage=(60, 5)), model="m-plain")
    with dashboard(tmp_path / "home", config, csrf=True) as client:
        key = api_chat(client)
        assert api_turn(client, key, "I like tea")["status"] == "complete"
        deadline = time.monotonic() + 10
        rows = _rows(store_of(client), chores=True)
        while not any(r["purpose"] == "learning" for r in rows):
            assert time.monotonic() < deadline, rows
            time.sleep(0.05)
            rows = _rows(store_of(client), chores=True)
    by_purpose = {r["purpose"]: r for r in rows}
    assert {"turn", "learning"} <= set(by_purpose)
    assert by_purpose["turn"]["model_id"] == "priced"
    learning = by_purpose["learning"]
    assert (learning["model_id"], learning["outcome"], learning["tokens_in"]) == ("plain", "ok",
                                                                                 60)
    assert learning["cost_usd"] is None and learning["session_key"] == key


def test_usage_api_and_page_add_up_the_rows(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="first", usage=(1000, 500)), Reply(status=500),
                      Reply(text="third", usage=(200, 100)), model="m-priced")
    key = api_chat(client)
    api_turn(client, key, "one")
    api_turn(client, key, "two")
    api_turn(client, key, "three")
    turns = _rows(store_of(client), 3)
    rows = _rows(store_of(client), 6, chores=True)  # and the chores': a title, learning twice
    assert len(rows) == 6, rows
    body = client.get("/api/usage").json()
    want_cost = sum(r["cost_usd"] for r in rows)
    for axis, name in (("models", "model_id"), ("days", "day"), ("providers", "provider"),
                       ("purposes", "purpose")):
        totals = body[axis]
        assert sum(t["calls"] for t in totals) == len(rows), axis
        assert sum(t["tokens_in"] for t in totals) == sum(r["tokens_in"] for r in rows)
        assert sum(t["cost_usd"] for t in totals) == pytest.approx(want_cost)
        assert all(name in t for t in totals)
    assert {t["purpose"]: t["calls"] for t in body["purposes"]} == {"turn": 3, "title": 1,
                                                                    "learning": 2}
    outcomes = {o["outcome"]: o["calls"] for o in body["outcomes"]}
    assert outcomes == {o: sum(1 for r in rows if r["outcome"] == o) for o in outcomes}
    rows = turns
    page = client.get("/usage").text
    table = page.split("<caption>By purpose</caption>", 1)[1].split("</table>", 1)[0]
    cells = re.search(r'<th scope="row">turn</th>(.*?)</tr>', table, re.S)
    assert cells is not None
    values = [re.sub(r"<[^>]+>", "", c).strip()
              for c in re.findall(r"<td[^>]*>(.*?)</td>", cells.group(1), re.S)]
    assert values[:3] == [str(len(rows)), f"{sum(r['tokens_in'] for r in rows):,}",
                          f"{sum(r['tokens_out'] for r in rows):,}"]


def test_a_refused_call_is_recorded_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    db = migrated(tmp_path, "c.db")
    model = ModelConfig(id="other", model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    provider = build_provider(model, {})
    recorder = CallRecorder(db, lambda _model_id: None)
    before = guard.install(recorder)

    async def body() -> None:
        with as_work_of("chat-9", "incognito"), pytest.raises(reach.OtherModelRefused):
            guard.stream(provider, ModelRequest([Message("user", SECRET)], []),
                         purpose="turn")
        await recorder.settled()

    try:
        asyncio.run(body())
    finally:
        guard.install(before)
    [row] = _rows(db)
    db.close()
    assert (row["outcome"], row["session_key"], row["purpose"]) == ("refused", None, "turn")


def test_a_probe_outside_the_gateway_records_through_the_installed_recorder(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    db = migrated(tmp_path, "p.db")
    model = ModelConfig(id="fake", model="fake-model", base_url=model_server.openai_base_url,
                        api_key="sk-test")
    model_server.push(Reply(status=503))
    recorder = CallRecorder(db, lambda _model_id: None)
    before = guard.install(recorder)

    async def body() -> tuple[bool, str]:
        said = await probe(model, {}, timeout=5)
        await recorder.settled()
        return said

    try:
        answered, _sentence = asyncio.run(body())
    finally:
        guard.install(before)
    [row] = _rows(db)
    db.close()
    assert not answered
    assert (row["purpose"], row["outcome"], row["cost_usd"]) == ("probe", "failed", None)


class _TimedOut(ModelError):
    pass


class ReadTimeout(Exception):
    pass


def test_outcome_words() -> None:
    assert outcome_of(Completed("stop"), None) == "ok"
    assert outcome_of(Completed("tool_calls"), GeneratorExit()) == "ok"
    assert outcome_of(Completed("length"), None) == "output_cap"
    assert outcome_of(Completed("content_filter"), None) == "refused"
    assert outcome_of(None, asyncio.CancelledError()) == "cut_off"
    assert outcome_of(None, TimeoutError()) == "timeout"
    wrapped = _TimedOut("the model did not answer in time")
    wrapped.__cause__ = ReadTimeout()
    assert outcome_of(None, wrapped) == "timeout"
    assert outcome_of(None, ModelError("HTTP 500")) == "failed"
