"""Shared fixtures: a scripted model server, a private HEARTH_HOME, a gateway subprocess."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hearth.tools.base import ToolContext
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Gateway, write_config


@pytest.fixture(autouse=True)
def _private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test ever touches ~/.hearth or picks up a real key from the environment."""
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_TOKEN", "HEARTH_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HEARTH_OLLAMA_URL", "http://127.0.0.1:9")


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def gateway_factory(home: Path, model_server: ScriptedModelServer
                    ) -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []

    def make(config: str = "", env: dict[str, str] | None = None, model: bool = True,
             start: bool = True) -> Gateway:
        write_config(home, model_server.openai_base_url if model else None, config)
        gateway = Gateway(home, env)
        started.append(gateway)
        return gateway.start() if start else gateway

    yield make
    for gateway in started:
        gateway.kill()


@pytest.fixture
def gateway(gateway_factory: Callable[..., Gateway]) -> Gateway:
    return gateway_factory()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A chat's workspace folder, for tests that call tools directly."""
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    """What a tool called directly is handed: the workspace, a chat, a run."""
    return ToolContext(workspace=workspace, session_key="k", run_id="r")
