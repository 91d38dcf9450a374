"""The fake Slack speaks Slack's protocols: slack_sdk's own WebClient calls its Web API
unchanged (answers, errors, a 429 with Retry-After as SlackApiError), and what it signs passes
the SDK's own SignatureVerifier (and a changed body does not)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from tests.fakes.slack_server import BOT_USER, SECRET, TOKEN, FakeSlack


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as slack:
        yield slack


def test_the_sdks_client_posts_updates_and_opens_through_it(fake: FakeSlack) -> None:
    client = WebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])
    assert client.auth_test()["user_id"] == BOT_USER
    assert client.conversations_open(users="U1")["channel"]["id"] == "DU1"
    posted = client.chat_postMessage(channel="C1", text="hi", thread_ts="1.0",
                                     blocks=[{"type": "section",
                                              "text": {"type": "mrkdwn", "text": "hi"}}])
    client.chat_update(channel="C1", ts=posted["ts"], text="hello")
    [post] = fake.posts
    assert (post.channel, post.thread_ts, post.now) == ("C1", "1.0", "hello")
    assert post.blocks is not None and post.blocks[0]["type"] == "section"
    with pytest.raises(SlackApiError) as missing:
        client.chat_update(channel="C1", ts="9.9", text="x")
    assert missing.value.response["error"] == "message_not_found"


def test_errors_and_rate_limits_are_the_sdks_errors(fake: FakeSlack) -> None:
    wrong = WebClient(token="xoxb-wrong", base_url=fake.api_url, retry_handlers=[])
    with pytest.raises(SlackApiError, match="invalid_auth"):
        wrong.auth_test()
    fake.fail("chat.postMessage", 429, "ratelimited", retry_after=3)
    client = WebClient(token=TOKEN, base_url=fake.api_url, retry_handlers=[])
    with pytest.raises(SlackApiError) as limited:
        client.chat_postMessage(channel="C1", text="x")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "3"
    assert client.chat_postMessage(channel="C1", text="x")["ok"]
    fake.fail("chat.postMessage", 429, "ratelimited", retry_after=1, text="only this")
    assert client.chat_postMessage(channel="C1", text="another")["ok"]  # not the one scripted
    with pytest.raises(SlackApiError):
        client.chat_postMessage(channel="C1", text="only this")
    assert [(m.method, m.text) for m in fake.limited][-1] == ("chat.postMessage", "only this")
    assert [c.text for c in fake.calls][-2:] == ["another", "only this"]


def test_what_it_signs_passes_the_sdks_verifier(fake: FakeSlack) -> None:
    body, stamp = b'{"type":"event_callback"}', str(int(time.time()))
    signature = fake.sign(body, stamp)
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid(body, stamp, signature)
    assert not verifier.is_valid(body + b" ", stamp, signature)
