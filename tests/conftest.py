"""Shared fixtures: a scripted model server, a private HEARTH_HOME, a gateway (served in this
process unless the test asks for the subprocess: `process=True`, or the `process_gateway` mark
where the process itself is under test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hearth.clock import Clock
from hearth.tools.base import ToolContext
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Gateway, write_config
from tests.inprocess import InProcessGateway


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


PROCESS_MARK = "process_gateway"


BROWSER_TESTS = Path(__file__).parent / "browser"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{PROCESS_MARK}: the `gateway` and `gateway_factory` "
                            "fixtures start `hearth gateway` as a real subprocess (a crash, a "
                            "signal, the process's files or exit is under test)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests keep their gateway subprocess: Playwright's sync API runs an event
    loop in the main thread, and the browser is a client of a real gateway process. Marks:
    `browser` for those, `slow` for every test whose gateway is a real process, so
    `pytest -m "not browser and not slow"` is the quick inner loop."""
    for item in items:
        if BROWSER_TESTS in item.path.parents:
            item.add_marker(PROCESS_MARK)
            item.add_marker(pytest.mark.browser)
        elif item.get_closest_marker(PROCESS_MARK) is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def gateway_factory(request: pytest.FixtureRequest, home: Path,
                    model_server: ScriptedModelServer) -> Iterator[Callable[..., Gateway]]:
    """Make a gateway on the test's home (started unless `start=False`): served in this process
    (`tests.inprocess`), or with `process=True` (or the `process_gateway` mark) a subprocess;
    one given a `clock` (tests/support/clock.py's `FakeClock`) is always served in this process."""
    started: list[Gateway] = []
    marked = request.node.get_closest_marker(PROCESS_MARK) is not None

    def make(config: str = "", env: dict[str, str] | None = None, model: bool = True,
             start: bool = True, process: bool | None = None,
             clock: Clock | None = None) -> Gateway:
        write_config(home, model_server.openai_base_url if model else None, config)
        in_process = clock is not None or not (marked if process is None else process)
        gateway = InProcessGateway(home, env, clock) if in_process else Gateway(home, env)
        started.append(gateway)
        return gateway.start() if start else gateway

    yield make
    failed: list[Exception] = []
    for gateway in started:  # one that will not stop does not leave the others running
        try:
            gateway.kill()
        except Exception as error:  # noqa: BLE001 - raised below, once all are stopped
            failed.append(error)
    if failed:
        raise failed[0]


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
