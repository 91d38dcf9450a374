"""What a command may do unasked, decided by placement: the holes an outside review found in
the shell, each driven as an attacker would, each with the old behaviour in its docstring.

A "read" runs inside the sandbox with the workspace read-only and no network, so a command
the screen mistook for a reader fails instead of writing. Without the sandbox every command
is asked, and restricted chats get no shell. Grants cover what was asked, the home is never in
a workspace, output is bounded, and the denylist reads the parsed command.
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop
from fastapi.testclient import TestClient

from hearth.config import Config, load_config
from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.home import Home, owner_umask, private_umask
from hearth.privacy.principal import OWNER
from hearth.privacy.scope import as_work_of
from hearth.store import approvals as approval_store
from hearth.tools import fence
from hearth.tools.base import ToolContext, ToolOutcome, ToolRefused
from hearth.tools.files import ListDir, ReadFile
from hearth.tools.sandbox import Placement, bwrap_works, wrap
from hearth.tools.search import Grep
from hearth.tools.shell import Shell, clean_environment
from hearth.tools.shell_denylist import refusal
from hearth.tools.shell_screen import one_command_beyond, reads_only
from hearth.web.app import create_app
from tests.engine_harness import make_config, make_engine, new_chat
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.commands import DISGUISED_WRITERS
from tests.support.dashboard import bearer, dashboard, sign_in

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")


def context(workspace: Path, where: Placement, **more: Any) -> ToolContext:
    return ToolContext(workspace=workspace, session_key="k", run_id="r", placement=where, **more)


def run(command: str, ctx: ToolContext) -> ToolOutcome:
    return asyncio.run(Shell().run({"command": command}, ctx))


# -- 1. "reads" that run code or write files  ---

@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a changed file (so `git diff` has something to show)."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "notes.txt").write_text("b\na\n")
    git = ["git", "-C", str(folder), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    (folder / "notes.txt").write_text("b\na\nc\n")
    return folder


@needs_bwrap
@pytest.mark.parametrize("command", DISGUISED_WRITERS)
def test_a_disguised_writer_that_runs_unasked_cannot_write(command: str, repo: Path) -> None:
    """Before: the screen called each of these a read, so it ran without approval in an "ask"
    chat, with the workspace writable, and `pwned` appeared in it. Now a call runs unasked only
    read-only: it may fail, it never writes. The control runs the same line writable (as an
    approved change would run) and finds `pwned`: the placement is what stopped it."""
    ctx = context(repo, Placement("bwrap", network=True))
    assert Shell().classify({"command": command}, ctx) == "reads"  # the screen was fooled
    run(command, ctx)
    assert not (repo / "pwned").exists()
    writable = wrap(["bash", "-c", command], repo, False)
    subprocess.run(writable, cwd=repo, env=clean_environment(str(repo)), capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=30, check=False)
    assert (repo / "pwned").exists()


@needs_bwrap
def test_a_read_has_no_network_even_where_the_sandbox_allows_it(repo: Path) -> None:
    """A read that could reach the network could change something elsewhere (a POST)."""
    ctx = context(repo, Placement("bwrap", network=True))
    outcome = run("cat /proc/net/dev", ctx)
    interfaces = [line.split(":")[0].strip() for line in outcome.output.splitlines()[2:]
                  if ":" in line]
    assert interfaces == ["lo"]


@pytest.mark.parametrize("mode", ["off", "unavailable"])
def test_without_the_sandbox_no_command_is_a_read(mode: str, repo: Path) -> None:
    """Before: `ls`, `cat`, `git log` counted as reads on the host too, where the screen was
    the only guard."""
    ctx = context(repo, Placement(mode))
    for command in ("ls", "cat notes.txt", "git log", *DISGUISED_WRITERS):
        assert Shell().classify({"command": command}, ctx) == "changes"


def test_an_ask_chat_without_the_sandbox_asks_even_for_ls(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: `ls` ran unasked on the host in an "ask" chat."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url,
                                               tools={"sandbox": "off"}))
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "ls"}, id="c1")]),
                      Reply(text="ok"))
    pending = asyncio.run(_asked(engine, new_chat(engine, trust="ask")))
    assert [(p["tool"], p["effect"], p["target"]) for p in pending] == [
        ("shell", "changes", "ls")]


async def _asked(engine: Engine, key: str) -> list[dict[str, Any]]:
    await engine.start()
    try:
        admitted = await engine.send(key, "list", principal=OWNER)
        for _ in range(500):
            pending = await engine.desk.pending()
            if pending:
                for row in pending:
                    await engine.desk.decide(row["id"], "deny", None)
                return pending
            view = await queries.run_status(engine.db, admitted.run_id)
            assert view is not None and view["status"] in ("admitted", "running"), view
            await asyncio.sleep(0.02)
        raise AssertionError("the run never asked")
    finally:
        await engine.close()


# -- 3. the home is never inside a workspace  ---

@pytest.fixture
def above_home(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace folder that contains a Hearth home holding a token and a config key."""
    above = tmp_path / "above"
    home = above / "hearth-home"
    (home / "workspace").mkdir(parents=True)
    (home / "token").write_text("TOKEN-SECRET-1234\n")
    (home / "config.toml").write_text('api_key = "sk-CONFIG-SECRET"\n')
    (above / "project.txt").write_text("TOKEN notes\n")
    return above, home


def test_the_file_tools_refuse_and_hide_the_home_whatever_the_workspace(
        above_home: tuple[Path, Path]) -> None:
    """Before: with workspace_dir above HEARTH_HOME, read_file and grep returned the token and
    a config API key without approval."""
    above, home = above_home
    ctx = context(above, Placement("off", hidden=(str(home),)))
    with pytest.raises(ToolRefused) as caught:
        asyncio.run(ReadFile().run({"path": "hearth-home/token"}, ctx))
    assert "Hearth home" in caught.value.sentence
    found = asyncio.run(Grep().run({"pattern": "SECRET|TOKEN"}, ctx)).output
    assert "SECRET" not in found and "project.txt" in found
    listed = asyncio.run(ListDir().run({"path": "."}, ctx)).output
    assert "hearth-home" not in listed and "project.txt" in listed
    with pytest.raises(ToolRefused):
        asyncio.run(ListDir().run({"path": "hearth-home"}, ctx))


@needs_bwrap
def test_the_sandbox_hides_the_home_inside_a_workspace_that_holds_it(
        above_home: tuple[Path, Path]) -> None:
    """Before: the workspace's bind mount, made after the home was hidden, put the home back
    in view: a sandboxed `cat` read the token, and `sqlite3` wrote to the memory tables."""
    above, home = above_home
    ctx = context(above, Placement("bwrap", hidden=(str(home),)))
    outcome = run(f"cat {shlex.quote(str(home / 'token'))} hearth-home/config.toml; "
                  "ls -a hearth-home; cat project.txt", ctx)
    assert "SECRET" not in outcome.output
    assert "TOKEN notes" in outcome.output  # the rest of the workspace is there


def test_a_workspace_dir_at_inside_or_around_the_home_is_refused(tmp_path: Path) -> None:
    """Before: POST /api/sessions took any existing folder, / and the home's parent included."""
    home = tmp_path / "outer" / "home"
    app = create_app(Home(home), Config())
    (home / "workspace" / "proj").mkdir(parents=True, exist_ok=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with TestClient(app) as client:
        auth = bearer(client)
        for folder in ("/", str(home.parent), str(home), str(home / "workspace" / "proj")):
            answer = client.post("/api/sessions", json={"workspace_dir": folder}, headers=auth)
            assert answer.status_code == 422, (folder, answer.text)
            assert answer.json()["error"]["code"] == "invalid_workspace_dir"
            assert answer.json()["error"]["message"].endswith(".")
        fine = client.post("/api/sessions", json={"workspace_dir": str(elsewhere)}, headers=auth)
        assert fine.status_code == 201, fine.text


# -- 5. bounded output  ---

def test_a_flood_of_output_costs_the_gateway_a_bounded_buffer(tmp_path: Path) -> None:
    """Before: the whole output was read (`communicate()`) and then cut: 1 GB of output took
    the gateway to 2.4 GB. Here 64 MB of output must not cost even 8 MB."""
    ctx = context(tmp_path, Placement("off"), output_chars=1000)
    tracemalloc.start()
    try:
        outcome = run("head -c 67108864 /dev/zero | tr '\\0' x", ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak
    assert "[output cut at 1000 characters of 64.0 MB]" in outcome.output
    assert outcome.output.startswith("x" * 1000 + "\n[")


# -- 6. grants match what was asked  ---

@pytest.mark.parametrize("command", [
    "touch ok && rm -rf notes",
    "touch ok; rm notes",
    "touch ok || rm notes",
    "touch ok | sh",
    "touch ok $(rm notes)",
    "touch ok `rm notes`",
    "touch ok > notes",
    "touch ok\nrm notes",
    "touch ok ${x@P}",
])
def test_a_prefix_grant_does_not_cover_a_chained_command(command: str) -> None:
    """Before: a grant for `touch ok` covered every command starting `touch ok `, chained ones
    included, so Always on `touch ok` ran `touch ok && …` unasked."""
    assert not one_command_beyond("touch ok", command)


def test_a_prefix_grant_covers_one_simple_command_and_the_whole_command_is_matched(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: the grant was matched against the command's first 500 characters, so padding
    pushed a chained command past what was checked."""
    assert one_command_beyond("touch ok", "touch ok more-files.txt")
    padded = "touch ok " + "a" * 600 + " && touch chained"
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    with engine.db.write() as conn:
        approval_store.add_grant(conn, agent="default", tool="shell", prefix="touch ok",
                                 approval_id=None)
    model_server.push(Reply(tool_calls=[Call("shell", {"command": padded}, id="c1")]),
                      Reply(text="ok"))
    key = new_chat(engine, trust="ask")
    pending = asyncio.run(_asked(engine, key))
    assert [p["tool"] for p in pending] == ["shell"]
    assert not (Path(engine.deps.default_workspace) / "chained").exists()


# -- 7. fail closed without a sandbox  ---

@pytest.mark.parametrize("mode", ["incognito", "temporary", "no-such-mode"])
def test_a_restricted_chat_gets_no_shell_without_the_sandbox(mode: str, tmp_path: Path) -> None:
    """Before: without bwrap, the only fence between a restricted chat's shell and the memory
    folder was matching the command's text."""
    ctx = context(tmp_path, Placement("off", why="bwrap is not installed (install bubblewrap)"))
    with as_work_of("chat-1", mode):
        sentence = fence.refusal(Shell(), {"command": "ls"}, ctx)
    assert sentence is not None
    assert "the shell cannot be sandboxed here (bwrap is not installed" in sentence
    assert sentence.endswith("so no command may run for it.")
    assert fence.refusal(Shell(), {"command": "ls"}, ctx) is None  # a kept chat is asked


def test_healthz_and_settings_say_when_the_shell_is_not_sandboxed(tmp_path: Path) -> None:
    """Before: sandbox = "auto" fell back to the host and nothing said so."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[tools]\nsandbox = "off"\n')
    with dashboard(home, load_config(home / "config.toml")) as client:
        health = client.get("/healthz").json()
        assert health["sandbox"]["mode"] == "off" and health["sandbox"]["sandboxed"] is False
        assert health["sandbox"]["says"].startswith("NOT sandboxed")
        sign_in(client)
        page = client.get("/settings").text
        assert "NOT sandboxed" in page and 'sandbox = &#34;off&#34;' in page


# -- the sandbox does not show the machine's people or secrets  ---

@needs_bwrap
def test_the_sandbox_hides_homes_root_and_etc_secrets(tmp_path: Path) -> None:
    """Before: a sandboxed command could list /root and /home and read /etc/shadow and the
    SSH host keys wherever the gateway could (as root: all of them)."""
    ctx = context(tmp_path, Placement("bwrap"))
    people = run("ls -A /root /home /var/mail | grep -v ':$' | grep -c . || true", ctx)
    assert people.output.startswith("0\n"), people.output
    secrets = run("cat /etc/shadow /etc/gshadow /etc/ssh/ssh_host_*_key 2>&1", ctx).output
    for host_file in (Path("/etc/shadow"), *Path("/etc/ssh").glob("ssh_host_*_key")):
        try:
            lines = [line for line in host_file.read_text().splitlines() if len(line) > 8]
        except OSError:
            continue  # not readable here either
        assert not any(line in secrets for line in lines), host_file


# -- 10. the denylist reads the parsed command  ---

@pytest.mark.parametrize("command", [
    r"r\m -rf /",
    "'rm' -r -f /",
    "/bin/rm -rf -- /",
    "env X=1 rm -rf ~",
    "rm --rec --force /",
    "rm -rf //",
    "cat $(rm -rf /)",
    "for i in 1; do reboot; done",
    "systemctl poweroff",
    "git push --forc origin main",
    "git push origin +main",
    "git -C repo push -f",
    "nice -n 5 mkfs.ext4 /dev/sdb1",
])
def test_the_denylist_is_not_bypassed_by_respelling(command: str) -> None:
    """Before: each respelling passed the denylist's text patterns."""
    assert refusal(command) is not None


def test_the_screen_is_no_longer_the_guard() -> None:
    """The screen still says which lines are worth trying read-only; those include the
    disguised writers above (this is why it cannot be the guard)."""
    assert all(reads_only(c) for c in DISGUISED_WRITERS)


@pytest.mark.process_gateway  # the CLI's start line
def test_the_gateway_start_line_says_the_shell_is_not_sandboxed(
        gateway_factory: Callable[..., Gateway]) -> None:
    """Before: the start line named only the address and the home; an "auto" sandbox that fell
    back to the host said nothing anywhere."""
    gateway = gateway_factory('[tools]\nsandbox = "off"\n')
    assert ('Shell: NOT sandboxed: [tools] sandbox = "off" in config.toml; every shell command '
            "is asked") in gateway.output()


def test_a_command_makes_the_owners_files_with_the_owners_umask(tmp_path: Path) -> None:
    """The gateway makes its own files under umask 077; the agent's commands make the owner's
    files as the owner's shell would (before: 0600, inherited from the gateway)."""
    private_umask()
    ctx = context(tmp_path, Placement("off"))
    loop = uvloop.new_event_loop()  # the gateway's loop: its subprocesses take no `umask=`
    try:
        outcome = loop.run_until_complete(Shell().run({"command": "touch made"}, ctx))
    finally:
        loop.close()
    assert outcome.ok, outcome.output
    assert (tmp_path / "made").stat().st_mode & 0o777 == 0o666 & ~owner_umask()
