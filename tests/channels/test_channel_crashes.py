"""The crash matrix's points for Matrix, Slack and email: a real gateway subprocess is killed
(`os._exit`) at each point between a message arriving and its reply being recorded sent, then
started again. After each: the message was admitted once (Matrix reads it again from the
committed `since`; Slack and a mail server deliver again what was not acknowledged), and each
thing the chat said reached the conversation exactly once: Matrix sends a cut-off send again
with the same transaction id (one event), Slack and email say once that it may not have
arrived and never send it again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hearth.faults import EXIT_CODE
from tests.channels.test_email import BOT, OWNER as MAIL_OWNER, email_config
from tests.channels.test_matrix import DM, OWNER as MATRIX_OWNER, matrix_config
from tests.channels.test_slack import OWNER as SLACK_OWNER, slack_config
from tests.fakes.mail_server import FakeRelay, free_port, mail, send
from tests.fakes.matrix_server import FakeMatrix
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.slack_server import FakeSlack, dm
from tests.gateway import Api, Gateway
from tests.support.polling import until
from tests.support.telegram import chats, running

pytestmark = pytest.mark.process_gateway

POINTS = ("channel_admitted", "run_start", "mid_stream", "answer_persisted", "delivery_sent")
ANSWER = "The answer is forty-two."
UNKNOWN = "may not have arrived"


def _said(api: Api, key: str) -> list[str]:
    return [m["text"] for m in api.messages(key) if m["kind"] in ("assistant", "notice")
            and "delivery" not in m["meta"]]


def _ledger(api: Api, key: str) -> list[str]:
    return [m["text"] for m in api.messages(key) if "delivery" in m["meta"]]


def _crashed(gateway: Gateway, point: str) -> None:
    until(lambda: gateway.proc is not None and gateway.proc.poll() is not None, timeout=30,
          what=f"the gateway dying at {point}")
    assert gateway.proc is not None and gateway.proc.returncode == EXIT_CODE, gateway.output()
    gateway.kill()
    gateway.extra_env = {}
    gateway.start()


def _settled(api: Api) -> str:
    [chat] = until(lambda: chats(api), what="the conversation's chat")
    key = str(chat["key"])

    def done() -> bool:
        answer = api.http.get(f"/api/sessions/{key}").json()
        return not answer["running"] and any(m["kind"] == "assistant"
                                             for m in answer["messages"])
    until(done, timeout=30, what="the turn ended")
    users = [m["text"] for m in api.messages(key) if m["kind"] == "user"]
    assert users == ["what is the answer?"], "admitted twice, or lost"
    return key


def _script(model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text=ANSWER, chunks=4, delay=0.05))
    model_server.default = Reply(text="Recovered answer.")


@pytest.mark.parametrize("point", POINTS)
def test_matrix(point: str, matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
                model_server: ScriptedModelServer) -> None:
    _script(model_server)
    matrix.room(DM, [MATRIX_OWNER])
    gateway = gateway_factory(config=matrix_config(matrix), env={"HEARTH_CRASH_AT": point})
    until(lambda: len(matrix.syncs) >= 2, timeout=30, what="syncing from the present")
    matrix.message(DM, MATRIX_OWNER, "what is the answer?")
    _crashed(gateway, point)
    api = gateway.client()
    key = _settled(api)
    said = _said(api, key)
    until(lambda: len(matrix.sent_to(DM)) >= len(said), timeout=20, what="the deliveries")
    time.sleep(1.5)  # a duplicate would be sent by now
    assert [s.body for s in matrix.sent_to(DM)] == said, "a reply was lost or sent twice"
    assert _ledger(api, key) == []  # a send cut off is sent again as the same event


def _through_slack(slack: FakeSlack, gateway: Gateway, event: dict[str, Any]) -> None:
    """Deliver the event as Slack does: again (a retry) while it was not acknowledged."""
    def delivered() -> bool:
        try:
            running(gateway.client(), "slack", timeout=2)
            answer = slack.deliver(f"{gateway.url}/channels/slack/events", event,
                                   event_id="Ev-crash", retry=1)
        except (AssertionError, OSError, httpx.HTTPError):
            return False
        return answer.status_code == 200
    until(delivered, timeout=30, what="Slack's delivery acknowledged")


@pytest.mark.parametrize("point", POINTS)
def test_slack(point: str, slack: FakeSlack, gateway_factory: Callable[..., Gateway],
               model_server: ScriptedModelServer) -> None:
    _script(model_server)
    gateway = gateway_factory(config=slack_config(slack), env={"HEARTH_CRASH_AT": point})
    running(gateway.client(), "slack")
    event = dm(SLACK_OWNER, "what is the answer?")
    try:
        slack.deliver(f"{gateway.url}/channels/slack/events", event, event_id="Ev-crash")
    except (OSError, httpx.HTTPError):
        pass  # the gateway died before it answered: Slack will retry
    _crashed(gateway, point)
    _through_slack(slack, gateway, event)
    api = gateway.client()
    key = _settled(api)
    said = _said(api, key)
    channel = f"D{SLACK_OWNER}"
    until(lambda: len([p for p in slack.in_channel(channel) if p.now != "…"]) >= len(said),
          timeout=20, what="the deliveries")
    time.sleep(1.5)
    answers = [p.now for p in slack.in_channel(channel) if p.now != "…"]
    assert answers == said, "a reply was lost or sent twice"
    if point == "delivery_sent":
        assert len(_ledger(api, key)) == 1 and UNKNOWN in _ledger(api, key)[0]
    else:
        assert _ledger(api, key) == []


@pytest.mark.parametrize("point", POINTS)
def test_email(point: str, gateway_factory: Callable[..., Gateway],
               model_server: ScriptedModelServer) -> None:
    _script(model_server)
    with FakeRelay() as relay:
        port = free_port()
        gateway = gateway_factory(config=email_config(relay, port),
                                  env={"HEARTH_CRASH_AT": point})
        running(gateway.client(), "email")
        sent = mail(MAIL_OWNER, BOT, "what is the answer?", message_id="<crash@example.org>")
        try:
            send(port, sent, BOT)
        except OSError:
            pass  # no 250: the mail server keeps it and tries again
        _crashed(gateway, point)
        running(gateway.client(), "email")
        assert send(port, sent, BOT)[0] == 250  # the mail server's next try
        api = gateway.client()
        key = _settled(api)
        said = _said(api, key)
        until(lambda: len(relay.received) >= len(said), timeout=20, what="the deliveries")
        time.sleep(1.5)
        assert [m.get_content().strip() for m in relay.received] == said
        if point == "delivery_sent":
            assert len(_ledger(api, key)) == 1 and UNKNOWN in _ledger(api, key)[0]
        else:
            assert _ledger(api, key) == []
