"""A newcomer's path, from a fresh start to a first answer and a first approved tool call.

Target (issue 6): a new user sends a first message within a minute of `make run`. Issue 13
asks the same path timed to approving a first tool call, from the dashboard and from
`hearth chat`.

It starts `hearth gateway` with an empty HEARTH_HOME and no model, then does what the first-run
path asks of a person, over HTTP as the page does: sign in, add a model on the Settings page
(the scripted fake model server, speaking the OpenAI protocol), Test it, write a first message
on the new-chat page (which makes the chat) and wait until the answer is in the transcript;
then ask for a file to be written, answer its approval on the Approvals page, and wait for the
answer. Then the same from `hearth chat` in a real pty: a first answer, and a write approved at
its prompt. Each dashboard step is timed from the process start, each terminal step from the
chat's start. The typing and reading a person does are not in the figures; the install that
`make run` does first is timed apart (`--install`, into a fresh venv, from the package index).

A benchmark, not a test: it prints figures and exits 0 whatever they are.

    .venv/bin/python bench/first_run.py [--repeat 3] [--install]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pexpect

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from hearth.web.http import signin  # noqa: E402
from tests.fakes.model_server import Call, Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import TOKEN, Gateway  # noqa: E402

TARGET_S = 60.0


def first_answer(server: ScriptedModelServer) -> dict[str, float]:
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        began = time.monotonic()
        gateway = Gateway(home).start()
        marks["serving"] = time.monotonic() - began
        try:
            page = httpx.Client(base_url=gateway.url, follow_redirects=False, timeout=30)
            page.post("/login", data={"token": TOKEN})
            csrf = signin.csrf_for(TOKEN, page.cookies[signin.COOKIE])
            added = page.post("/settings/models", data={
                "csrf": csrf, "kind": "openai", "id": "local", "model": "fake-model",
                "base_url": server.openai_base_url, "api_key": "sk-bench"})
            assert added.status_code == 303, added.text
            marks["model added"] = time.monotonic() - began
            server.push(Reply(text="OK"))
            tested = page.post("/settings/models/local/test", data={"csrf": csrf})
            assert tested.status_code in (200, 303), tested.text
            marks["model tested"] = time.monotonic() - began
            server.push(Reply(text="Hello! How can I help?"))
            made = page.post("/chats/new", data={"csrf": csrf, "text": "hello",
                                                 "client_message_id": "first"})
            key = made.headers["location"].rsplit("/", 1)[1]
            _until(page, f"/chats/{key}", "How can I help?")
            marks["first answer"] = time.monotonic() - began
            marks["first approval"] = approved_on_the_page(page, csrf, server) - began
            marks.update(terminal(gateway, server))
        finally:
            gateway.stop()
    return marks


def _until(page: httpx.Client, path: str, words: str) -> None:
    while words not in page.get(path).text:
        time.sleep(0.02)


def approved_on_the_page(page: httpx.Client, csrf: str, server: ScriptedModelServer) -> float:
    """A new chat asks for a file to be written; the call is allowed on the Approvals page."""
    server.push(Reply(tool_calls=[Call("write_file", {"path": "todo.md", "content": "- tea"})]),
                Reply(text="Your list is written."))
    made = page.post("/chats/new", data={"csrf": csrf, "text": "write my list",
                                         "client_message_id": "second"})
    key = made.headers["location"].rsplit("/", 1)[1]
    waiting: list[dict[str, str]] = []
    while not waiting:
        waiting = page.get("/api/approvals", headers={"X-CSRF-Token": csrf}).json()["approvals"]
        time.sleep(0.02)
    page.post(f"/approvals/{waiting[0]['id']}", data={"csrf": csrf, "decision": "allow_once"})
    _until(page, f"/chats/{key}", "Your list is written.")
    return time.monotonic()


def terminal(gateway: Gateway, server: ScriptedModelServer) -> dict[str, float]:
    """`hearth chat` in a pty: a first answer, then a write approved at its prompt."""
    env = {**gateway.env(), "HEARTH_TOKEN": TOKEN}
    began = time.monotonic()
    chat = pexpect.spawn(str(ROOT / ".venv" / "bin" / "hearth"), ["chat", "--url", gateway.url],
                         env=env, encoding="utf-8", timeout=30)
    marks: dict[str, float] = {}
    try:
        chat.expect("you> ")
        marks["terminal: prompt"] = time.monotonic() - began
        server.push(Reply(text="Hi from the terminal."))
        chat.sendline("hello")
        chat.expect("Hi from the terminal.")
        marks["terminal: first answer"] = time.monotonic() - began
        server.push(Reply(tool_calls=[Call("write_file", {"path": "t.md", "content": "x"})]),
                    Reply(text="Written from the terminal."))
        chat.sendline("write t.md")
        chat.expect(r"\[o\]nce")
        chat.sendline("o")
        chat.expect("Written from the terminal.")
        marks["terminal: first approval"] = time.monotonic() - began
    finally:
        chat.terminate(force=True)
    return marks


def install_seconds() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(ROOT)],
                       check=True, env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
        return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--install", action="store_true",
                        help="also time a fresh install (network: the package index)")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load: {os.getloadavg()[0]:.2f}")
    runs: list[dict[str, float]] = []
    with ScriptedModelServer() as server:
        for _ in range(args.repeat):
            runs.append(first_answer(server))
    for step in runs[0]:
        values = [r[step] for r in runs]
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{step:>24}: median {statistics.median(values):6.2f} s  ({shown})")
    worst = max(r["first answer"] for r in runs)
    if args.install:
        installed = install_seconds()
        print(f"{'fresh install':>24}: {installed:6.1f} s (pip install into a new venv)")
        worst += installed
    verdict = "MET" if worst <= TARGET_S else "NOT MET"
    print(f"target: first answer within {TARGET_S:.0f} s of `make run`: {verdict} "
          f"(worst {worst:.1f} s; {worst / TARGET_S:.0%} of the budget, typing not counted)")


if __name__ == "__main__":
    main()
