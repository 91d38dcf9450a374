"""A Hearth gateway run as a real subprocess for end-to-end tests, and a client for it (the
in-process gateway, with the same interface, is `tests.inprocess.InProcessGateway`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth.clock import Clock
from tests import launcher
from tests.fakes.model_server import ScriptedModelServer
from tests.support.store import seed_home

TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(home: Path, model_url: str | None, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    text = ""
    if model_url is not None:
        text += (
            '[[models]]\nid = "fake"\nprovider = "openai"\n'
            f'base_url = "{model_url}"\napi_key = "sk-test"\nmodel = "fake-model"\n\n'
        )
    (home / "config.toml").write_text(text + extra, encoding="utf-8")


_PROBE: list[httpx.Client] = []
_TLS: list[ssl.SSLContext] = []


def _probe() -> httpx.Client:
    """One client, made once, for the readiness polls: a new client per poll costs ~25 ms of
    CPU (its TLS context), stolen from the gateway starting beside it. It keeps no connection
    open between polls, so a gateway's stop never waits on one of its."""
    if not _PROBE:
        _PROBE.append(httpx.Client(timeout=1, limits=httpx.Limits(max_keepalive_connections=0)))
    return _PROBE[0]


def _tls() -> ssl.SSLContext:
    """The TLS context every `Api` shares (made once: ~20 ms each; the gateway is plain HTTP)."""
    if not _TLS:
        _TLS.append(ssl.create_default_context())
    return _TLS[0]


class Gateway:
    """`hearth gateway` in a subprocess with its own HEARTH_HOME."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.proc: launcher.Launched | None = None
        self.log = home / "gateway.log"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
        env.update({"HEARTH_HOME": str(self.home), "HEARTH_TOKEN": TOKEN,
                    "HEARTH_OLLAMA_URL": "http://127.0.0.1:9", "PYTHONUNBUFFERED": "1"})
        env.update(self.extra_env)
        return env

    def start(self, wait: bool = True) -> Gateway:
        seed_home(self.home, self.env())  # the template's schema: no migration child to wait on
        self.proc = launcher.spawn(["gateway", "--port", str(self.port)], self.env(), self.log)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until the gateway answers; fail at once if it ended first, saying how."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ended = self.ended()
            if ended is not None:
                raise AssertionError(f"{ended}:\n{self.output()}")
            if self.ready():
                return
            time.sleep(0.02)
        raise AssertionError(f"gateway did not become ready:\n{self.output()}")

    def ended(self) -> str | None:
        """How the gateway ended, if it has."""
        assert self.proc is not None
        code = self.proc.poll()
        return None if code is None else f"gateway exited {code}"

    def ready(self) -> bool:
        return self.answers()

    def answers(self) -> bool:
        """Does `/healthz` answer 200 now?"""
        try:
            return _probe().get(f"{self.url}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def client(self, token: str = TOKEN) -> Api:
        return Api(self.url, token)


class Api:
    """A thin httpx client with helpers for the routes the tests use."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=30, verify=_tls())

    def new_chat(self, **body: Any) -> str:
        """A new chat; trusted unless said otherwise, so tests not about approvals run their
        tools without asking (the approval tests make chats with trust="ask")."""
        body.setdefault("trust", "trusted")
        answer = self.http.post("/api/sessions", json=body)
        assert answer.status_code in (200, 201), answer.text
        return str(answer.json()["key"])

    def send(self, key: str, text: str, **extra: Any) -> dict[str, Any]:
        answer = self.http.post(f"/api/sessions/{key}/messages", json={"text": text, **extra})
        assert answer.status_code == 202, answer.text
        return dict(answer.json())

    def wait(self, run_id: str, timeout: float = 20) -> dict[str, Any]:
        answer = self.http.get(f"/api/runs/{run_id}/wait", params={"timeout": timeout},
                               timeout=timeout + 5)
        assert answer.status_code == 200, answer.text
        body = dict(answer.json())
        assert not body["timed_out"], body
        return body

    def messages(self, key: str, **params: Any) -> list[dict[str, Any]]:
        answer = self.http.get(f"/api/sessions/{key}", params={"limit": 1000, **params})
        assert answer.status_code == 200, answer.text
        return list(answer.json()["messages"])

    def frames(self, key: str, after: int, until: Any, timeout: float = 20) -> list[dict[str, Any]]:
        """Read SSE frames after `after` until `until(frame)` is true."""
        got: list[dict[str, Any]] = []
        with self.http.stream("GET", f"/api/sessions/{key}/events", params={"after": after},
                              timeout=timeout) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    frame = json.loads(line[6:])
                    got.append(frame)
                    if until(frame):
                        break
        return got


def module_gateway(tag: str, config: str | Callable[[ScriptedModelServer], str] = "",
                   process: bool = False, clock: Clock | None = None
                   ) -> tuple[object, object, object]:
    """The fixtures of a test module whose tests share one gateway (starting one costs
    seconds), all module-scoped: `server`, a scripted model server; `gateway`, a gateway whose
    model is that server (its home in a temporary folder named after `tag`, `config` added to
    its config.toml: the text, or what it gives for the server), served in this process
    (`tests.inprocess`, its timed loops on `clock` when given) or, with `process`, a
    subprocess; `api`, a client of that gateway.
    Bind them at module level under the names the tests ask for:

        server, gateway, api = module_gateway("jobs-api")
    """

    @pytest.fixture(scope="module", name="server")
    def server_fixture() -> Iterator[ScriptedModelServer]:
        with ScriptedModelServer() as model_server:
            yield model_server

    @pytest.fixture(scope="module", name="gateway")
    def gateway_fixture(tmp_path_factory: pytest.TempPathFactory,
                        server: ScriptedModelServer) -> Iterator[Gateway]:
        home = tmp_path_factory.mktemp(tag) / "home"
        write_config(home, server.openai_base_url,
                     config(server) if callable(config) else config)
        if process:
            started = Gateway(home).start()
        else:
            from tests.inprocess import InProcessGateway  # it builds on this module's Gateway

            started = InProcessGateway(home, clock=clock).start()
        yield started
        started.kill()

    @pytest.fixture(scope="module", name="api")
    def api_fixture(gateway: Gateway) -> Iterator[Api]:
        client = gateway.client()
        yield client
        client.http.close()

    return server_fixture, gateway_fixture, api_fixture


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["kind"] for m in messages]


def iter_texts(messages: list[dict[str, Any]], kind: str) -> Iterator[str]:
    return (m["text"] for m in messages if m["kind"] == kind)
