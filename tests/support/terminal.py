"""`hearth chat` at a real terminal, as the tests of tests/client drive it: `Terminal` (the
command in a pty of its own, pexpect) and what a module of such tests shares. Its gateway is the
module's own (served in this process): its chat chain is the model `fake` and its background
chain another model, `bg`, so a learning call never takes a reply scripted for a turn. A module
imports the fixtures (`server`, `gateway`, `api`, `terminal`, and `fresh_script`, which empties
the script before each test); each is defined as `<name>_fixture` with `name=`."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from hearth.client.terminal import Screen
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.models import model

PROMPT = "you> "
QUESTION = "[o]nce, [a]lways, [d]eny? "
CHAT_MODEL = "fake-model"
OTHER_MODEL = "other-model"
LEAVE_LINE = re.compile(r"hearth chat --session (\S+)`")


class Typed(Screen):
    """A terminal whose prompt reads the given lines, then Ctrl-D (a `Repl` driven in this
    process, without a pty)."""

    def __init__(self, *lines: str) -> None:
        super().__init__(io.StringIO(), io.StringIO())
        self.lines = list(lines)

    def ask(self, prompt: str) -> str:
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)


def _config(server: ScriptedModelServer) -> str:
    """The chat chain `fake` (and `other`); the background chain `bg`."""
    url = server.openai_base_url
    return (model("other", url, OTHER_MODEL) + model("bg", url, "bg-model")
            + '[chains]\nchat = ["fake"]\nbackground = ["bg"]\n')


server_fixture, gateway_fixture, api_fixture = module_gateway("chat-terminal", _config)


@pytest.fixture(autouse=True)
def fresh_script(server: ScriptedModelServer) -> None:
    server.reset()


def script(server: ScriptedModelServer, *replies: Reply, model: str = CHAT_MODEL) -> None:
    server.push(*replies, model=model)


class Terminal:
    """`hearth chat ARGS` in a pty of its own."""

    def __init__(self, gateway: Gateway, home: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
        env.update({"HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN, "TERM": "dumb",
                    "PYTHONUNBUFFERED": "1"})
        self.child = pexpect.spawn(sys.executable,
                                   ["-m", "hearth", "chat", "--url", gateway.url, *args],
                                   env=env, encoding="utf-8", timeout=20, dimensions=(50, 200))
        self.seen = ""  # everything read so far

    def expect(self, text: str) -> str:
        """Read up to and including `text`: what came before it."""
        self.child.expect_exact(text)
        before = str(self.child.before)
        self.seen += before + text
        return before

    def type(self, line: str) -> None:
        self.child.sendline(line)

    def interrupt(self) -> None:
        self.child.sendintr()

    def leave(self) -> str:
        """Ctrl-D at the prompt: the key of the chat it names to continue (None when none)."""
        self.child.sendeof()
        return self.ended()

    def ended(self) -> str:
        """Read to the end; the process must have exited 0. What it printed last."""
        self.child.expect(pexpect.EOF)
        rest = str(self.child.before)
        self.seen += rest
        self.child.close()
        assert self.child.exitstatus == 0, self.seen
        return rest

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


@pytest.fixture(name="terminal")
def terminal_fixture(gateway: Gateway, tmp_path: Path) -> Iterator[Any]:
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        term = Terminal(gateway, tmp_path / "client-home", *args)
        opened.append(term)
        return term

    yield start
    for term in opened:
        term.close()


def chat_key(printed: str) -> str:
    found = LEAVE_LINE.search(printed)
    assert found, printed
    return found.group(1)


def run_of(api: Api, key: str, text: str) -> dict[str, Any]:
    """The run that answered the message `text` of chat `key`."""
    asked = next(m for m in api.messages(key) if m["kind"] == "user" and m["text"] == text)
    answer = api.http.get(f"/api/runs/{asked['run_id']}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def turn_calls(server: ScriptedModelServer) -> list[Any]:
    """The model calls of turns (not of the learning that follows them)."""
    return [r for r in server.calls("/v1/chat/completions") if r.model != "bg-model"]


def chat_keys(api: Api) -> set[str]:
    answer = api.http.get("/api/sessions", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return {s["key"] for s in answer.json()["sessions"]}
