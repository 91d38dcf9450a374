"""`hearth status` as a user runs it: the command in a subprocess against a real gateway,
reading `GET /api/status`."""

from __future__ import annotations

from pathlib import Path

from hearth import __version__
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.cli import hearth

WIDE = {"COLUMNS": "200"}


def test_status_shows_the_gateway_at_a_glance(gateway: Gateway, home: Path,
                                              model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    model_server.push(Reply(text="Hi.", usage=(1234, 5)))
    api.wait(api.send(api.new_chat(), "hello")["run_id"])
    shown = hearth("status", "--url", gateway.url, home=home, extra_env=WIDE)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "Hearth gateway" in out and __version__ in out and "sqlite" in out
    assert "ended since start" in out and "complete 1" in out
    assert "fake" in out and "closed" in out and "1,2" in out  # its tokens in, with commas
    assert "deliveries failed" in out and "owed chores" in out and "store commits" in out


def test_status_with_a_wrong_token_shows_the_refusal_and_exits_1(gateway: Gateway,
                                                                  home: Path) -> None:
    refused = hearth("status", "--url", gateway.url, home=home, token="not-the-token")
    assert refused.returncode == 1
    assert "token" in refused.stderr and not refused.stdout


def test_status_without_a_gateway_exits_3(home: Path) -> None:
    done = hearth("status", "--url", "http://127.0.0.1:9", home=home)
    assert done.returncode == 3 and "hearth gateway" in done.stderr
