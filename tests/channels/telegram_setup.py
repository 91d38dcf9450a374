"""What the Telegram tests share: the gateway's config for the fake Bot API server, and
readers of what a thread made (its `telegram` fixture is in this folder's conftest)."""

from __future__ import annotations

from typing import Any

from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Api

OWNER = 111
GUEST = 222


def telegram_config(fake: FakeTelegram, *, owner: int = OWNER, extra: str = "",
                    token: str | None = None) -> str:
    return (f'[channels.telegram]\ntoken = "{token or fake.token}"\n'
            f'base_url = "{fake.base_url}"\nowner_ids = [{owner}]\n'
            f"poll_timeout_seconds = 2\n{extra}")


def chats(api: Api) -> list[dict[str, Any]]:
    answer = api.http.get("/api/sessions")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["sessions"])


def health(api: Api) -> dict[str, Any]:
    return dict(api.http.get("/healthz").json()["channels"]["telegram"])
