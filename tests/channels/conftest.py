"""The channels' fixtures: a fake Telegram Bot API server for each test that asks for one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake
