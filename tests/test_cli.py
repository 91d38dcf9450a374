"""The `hearth` command as a user runs it: subprocesses against a real gateway subprocess."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, kinds, write_config

ANSWER = "Hello from the fake."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Gateway, ScriptedModelServer]]:
    """One gateway for the module (starting one per test would make the file slow)."""
    with ScriptedModelServer() as server:
        server.default = Reply(text=ANSWER)
        home = tmp_path_factory.mktemp("cli-gateway") / "home"
        write_config(home, server.openai_base_url)
        gateway = Gateway(home).start()
        try:
            yield gateway, server
        finally:
            gateway.kill()


@pytest.fixture
def api(served: tuple[Gateway, ScriptedModelServer]) -> Iterator[Api]:
    client = served[0].client()
    yield client
    client.http.close()


def hearth(*args: str, home: Path, stdin: str | None = None, token: str | None = TOKEN,
           extra_env: dict[str, str] | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
    env["HEARTH_HOME"] = str(home)
    if token is not None:
        env["HEARTH_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "hearth", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_hearth_token_prints_the_token(home: Path) -> None:
    done = hearth("token", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == TOKEN


def test_hearth_token_makes_a_private_token(home: Path) -> None:
    first = hearth("token", home=home, token=None)
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip()
    assert len(token) >= 32
    assert (home / "token").read_text().strip() == token
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600


def test_chat_m_prints_the_streamed_answer(
        served: tuple[Gateway, ScriptedModelServer], home: Path) -> None:
    gateway, _server = served
    done = hearth("chat", "-m", "hi", "--url", gateway.url, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ANSWER}\n"


def test_a_named_session_is_made_then_continued(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, server = served
    first = hearth("chat", "-m", "first words", "--session", "mychat", "--url", gateway.url,
                   home=home)
    assert first.returncode == 0, first.stderr
    assert ANSWER in first.stdout
    second = hearth("chat", "-m", "second words", "--session", "mychat", "--url", gateway.url,
                    home=home)
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"{ANSWER}\n"
    second_call = next(r for r in reversed(server.calls("/v1/chat/completions"))
                       if r.messages and r.messages[-1].get("content") == "second words")
    sent = [m for m in second_call.messages if m["role"] != "system"]
    assert sent == [
        {"role": "user", "content": "first words"},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "second words"},
    ]
    messages = api.messages("mychat")
    assert kinds(messages) == ["user", "assistant", "user", "assistant"]
    assert [m["text"] for m in messages][::2] == ["first words", "second words"]


def test_a_turn_that_ends_in_an_error_prints_its_sentence_and_exits_1(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, server = served
    server.push(Reply(text="partial answer", cut_after=1))
    done = hearth("chat", "-m", "x", "--session", "broken", "--url", gateway.url, home=home)
    assert done.returncode == 1, (done.stdout, done.stderr)
    notices = [m for m in api.messages("broken") if m["kind"] == "notice"]
    assert len(notices) == 1
    ending = notices[0]["meta"]["ending"]
    assert ending == "cut_off"
    assert f"[{ending}] {notices[0]['text']}" in done.stdout


def test_chat_without_a_gateway_exits_3_saying_how_to_start_it(home: Path) -> None:
    done = hearth("chat", "-m", "x", "--url", "http://127.0.0.1:9", home=home)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "hearth gateway" in done.stderr
    assert "127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_repl_answers_each_line_until_exit(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, _server = served
    done = hearth("chat", "--url", gateway.url, home=home, stdin="hello\n\nagain\n/exit\nlost\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(ANSWER) == 2
    key = done.stderr.split("Chat ", 1)[1].split()[0]
    messages = api.messages(key)
    assert kinds(messages) == ["user", "assistant", "user", "assistant"]
    assert [m["text"] for m in messages][::2] == ["hello", "again"]


def test_chat_finds_the_gateway_from_hearth_port(
        served: tuple[Gateway, ScriptedModelServer], home: Path) -> None:
    """Without --url the CLI goes where the configuration says; HEARTH_PORT beats the file."""
    gateway, _server = served
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[gateway]\nport = 9\n", encoding="utf-8")
    done = hearth("chat", "-m", "hi", home=home, extra_env={"HEARTH_PORT": str(gateway.port)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ANSWER}\n"
