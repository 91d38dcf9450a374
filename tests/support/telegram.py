"""What the tests of a gateway's Telegram channel share (the fake Bot API server is
tests/fakes/telegram_server.py, given as the `telegram` fixture): the gateway's config for it,
the sentence a chat moved to the dashboard is left with, and readers of what the channel and
its threads made."""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Api

OWNER = 111  # the owner's Telegram user id, so their own chat with the bot is 111 too
GUEST = 222
MOVED_AWAY = "This chat continues on the dashboard now. Messages here no longer reach it."


def telegram_config(fake: FakeTelegram, *, owners: tuple[int, ...] = (OWNER,),
                    extra: str = "", token: str | None = None, poll_seconds: int = 2) -> str:
    """The gateway's `[channels.telegram]` for `fake` (with `extra` lines in it)."""
    ids = ", ".join(str(i) for i in owners)
    return (f'[channels.telegram]\ntoken = "{token or fake.token}"\n'
            f'base_url = "{fake.base_url}"\nowner_ids = [{ids}]\n'
            f"poll_timeout_seconds = {poll_seconds}\n{extra}")


def chats(api: Api) -> list[dict[str, Any]]:
    answer = api.http.get("/api/sessions")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["sessions"])


def health(api: Api) -> dict[str, Any]:
    return dict(api.http.get("/healthz").json()["channels"]["telegram"])


def running(api: Api, name: str = "telegram", timeout: float = 10.0) -> dict[str, str]:
    """Wait until the channel says it is running; its entry of GET /api/channels."""
    deadline = time.monotonic() + timeout
    while True:
        found = {c["name"]: c for c in api.http.get("/api/channels").json()["channels"]}
        if found[name]["state"] == "running" or time.monotonic() > deadline:
            assert found[name]["state"] == "running", found
            return found[name]
        time.sleep(0.05)


def channel_in_state(api: Api, state: str, name: str = "telegram",
                     timeout: float = 10.0) -> dict[str, Any]:
    """Wait until /healthz says the channel is in `state`; its entry there."""
    deadline = time.monotonic() + timeout
    while (found := api.http.get("/healthz").json()["channels"][name])["state"] != state:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return dict(found)


def chat_of_thread(api: Api, thread: str, timeout: float = 10.0) -> str:
    """The chat a channel's thread opened (found by its first message's source)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for chat in api.http.get("/api/sessions").json()["sessions"]:
            messages = api.messages(chat["key"])
            if any(m["source"]["thread"] == thread for m in messages):
                return str(chat["key"])
        time.sleep(0.05)
    raise AssertionError(f"no chat was opened by thread {thread}")
