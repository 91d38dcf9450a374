"""The crash matrix's Telegram points: a real gateway subprocess polling the fake Bot API is
killed (`os._exit`) at each point between a message arriving and its reply being recorded,
then started again. After each: the message was admitted once, each thing the chat said
reached the thread exactly once (or, for a send cut off by the crash, once and never again,
with the chat saying it may not have arrived), and the offset was committed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hearth.faults import EXIT_CODE
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Api, Gateway
from tests.support.polling import until
from tests.support.telegram import OWNER, chats, telegram_config

pytestmark = pytest.mark.process_gateway

# from the message's arrival to its reply recorded sent, in the order a turn passes them
POINTS = ("channel_admitted", "run_start", "mid_stream", "answer_persisted", "delivery_sent")
ANSWER = "The answer is forty-two."
UNKNOWN = "may not have arrived"


def _said(api: Api, key: str) -> list[dict[str, Any]]:
    """What the chat said that its thread hears: answers and notices, not the ledger's own."""
    return [m for m in api.messages(key) if m["kind"] in ("assistant", "notice")
            and "delivery" not in m["meta"]]


def _settled(api: Api, key: str) -> bool:
    answer = api.http.get(f"/api/sessions/{key}").json()
    return not answer["running"] and any(m["kind"] == "assistant" for m in answer["messages"])


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_neither_loses_nor_repeats_a_telegram_reply(
        point: str, telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text=ANSWER, chunks=4, delay=0.05))
    model_server.default = Reply(text="Recovered answer.")
    gateway = gateway_factory(config=telegram_config(telegram), env={"HEARTH_CRASH_AT": point})
    update = telegram.push_message(OWNER, OWNER, "what is the answer?")
    assert gateway.proc is not None
    until(lambda: gateway.proc is not None and gateway.proc.poll() is not None, timeout=30,
          what=f"the gateway dying at {point}")
    assert gateway.proc.returncode == EXIT_CODE, gateway.output()
    gateway.kill()
    gateway.extra_env = {}
    gateway.start()
    api = gateway.client()
    [chat] = until(lambda: chats(api), what="the thread's chat")
    until(lambda: _settled(api, chat["key"]), timeout=30, what="the turn ended")
    said = _said(api, chat["key"])
    until(lambda: len(telegram.sent(OWNER)) >= len(said), timeout=20, what="the deliveries")
    time.sleep(1.5)  # a duplicate would be sent by now
    sent = [s.plain for s in telegram.sent(OWNER)]
    assert sent == [m["text"] for m in said], "a reply was lost or sent twice"
    users = [m for m in api.messages(chat["key"]) if m["kind"] == "user"]
    assert [m["text"] for m in users] == ["what is the answer?"], "admitted twice"
    telegram.wait_confirmed(update)
    ledger = [m["text"] for m in api.messages(chat["key"]) if "delivery" in m["meta"]]
    if point == "delivery_sent":
        assert sent == [ANSWER]
        assert len(ledger) == 1 and UNKNOWN in ledger[0]
    else:
        assert ledger == []
