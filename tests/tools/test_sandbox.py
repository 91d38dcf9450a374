"""Placement: the shell under bwrap (workspace writable, the rest read-only, a private /tmp, no
network, its processes dying with it), elevated runs, and what happens without bwrap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.store.schema import audit
from hearth.tools import sandbox
from hearth.tools.base import ToolContext, ToolOutcome, ToolRefused
from hearth.tools.sandbox import Placement, bwrap_works, placement, wrap
from hearth.tools.shell import Shell, placed_argv
from tests.engine_harness import make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")

SANDBOXED = Placement("bwrap", network=False, elevated=False)
ELEVATED_OFF = ("Refused: running outside the sandbox is off here ([tools] elevated = false). "
                "Run the command without elevated.")
UNAVAILABLE = ("Refused: the sandbox is on ([tools] sandbox = \"on\") but bwrap cannot run "
               "here. Install bubblewrap, or set sandbox = \"auto\".")


@pytest.fixture
def sibling(tmp_path: Path) -> Path:
    """A folder next to the workspace (under the host's /tmp), outside it."""
    folder = tmp_path / "sibling"
    folder.mkdir()
    return folder


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A writable host folder outside /tmp, so the sandbox's private /tmp does not hide it."""
    folder = Path(tempfile.mkdtemp(prefix="hearth-sandbox-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def context(workspace: Path, where: Placement, timeout: float = 20) -> ToolContext:
    return ToolContext(workspace=workspace, session_key="k", run_id="r", shell_timeout=timeout,
                       placement=where)


def shell(command: str, ctx: ToolContext, **more: Any) -> ToolOutcome:
    return asyncio.run(Shell().run({"command": command, **more}, ctx))


def refused(command: str, ctx: ToolContext, **more: Any) -> str:
    with pytest.raises(ToolRefused) as caught:
        shell(command, ctx, **more)
    return caught.value.sentence


# -- no bwrap needed ------------------------------------------------------------------------

def test_placement_off_is_never_sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "bwrap_works", lambda: True)
    where = placement("off", True, True)
    assert where == Placement("off", network=True, elevated=True) and not where.sandboxed


@pytest.mark.parametrize(("setting", "works", "mode"), [
    ("on", True, "bwrap"),
    ("auto", True, "bwrap"),
    ("on", False, "unavailable"),
    ("auto", False, "off"),
])
def test_placement_follows_the_setting_and_whether_bwrap_works(
        monkeypatch: pytest.MonkeyPatch, setting: str, works: bool, mode: str) -> None:
    monkeypatch.setattr(sandbox, "bwrap_works", lambda: works)
    where = placement(setting, False, True)
    assert where == Placement(mode, network=False, elevated=True)
    assert where.sandboxed == (mode == "bwrap")


def test_bwrap_does_not_work_when_it_is_not_installed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    assert sandbox.bwrap_problem.__wrapped__() == "bwrap is not installed (install bubblewrap)"


def test_an_unavailable_sandbox_refuses_every_command_with_a_sentence(workspace: Path) -> None:
    ctx = context(workspace, Placement("unavailable"))
    assert refused("touch z", ctx) == UNAVAILABLE
    assert not (workspace / "z").exists()


@pytest.mark.parametrize("mode", ["bwrap", "off", "unavailable"])
def test_elevated_is_refused_when_elevated_runs_are_off(workspace: Path, mode: str) -> None:
    ctx = context(workspace, Placement(mode, network=False, elevated=False))
    assert refused("touch z", ctx, elevated=True) == ELEVATED_OFF
    assert not (workspace / "z").exists()


def test_placed_wraps_only_a_sandboxed_call_that_is_not_elevated(workspace: Path) -> None:
    argv = ["bash", "-c", "touch x"]
    args: dict[str, Any] = {"command": "touch x"}
    wrapped = placed_argv(argv, args, context(workspace, SANDBOXED))
    assert wrapped == wrap(argv, workspace, False)
    assert wrapped[0] == "bwrap" and wrapped[-4:] == ["--", *argv]
    assert "--unshare-net" in wrapped
    folder = str(workspace.resolve())
    assert ["--bind", folder, folder] == wrapped[wrapped.index("--bind"):][:3]
    networked = placed_argv(argv, args, context(workspace, Placement("bwrap", network=True)))
    assert networked[0] == "bwrap" and "--unshare-net" not in networked
    assert placed_argv(argv, args, context(workspace, Placement("off"))) == argv
    elevated = context(workspace, Placement("bwrap", elevated=True))
    assert placed_argv(argv, {**args, "elevated": True}, elevated) == argv


def test_a_read_is_placed_read_only_with_no_network_whatever_the_setting(workspace: Path) -> None:
    argv = ["bash", "-c", "ls"]
    wrapped = placed_argv(argv, {"command": "ls"},
                          context(workspace, Placement("bwrap", network=True)))
    folder = str(workspace.resolve())
    assert ["--ro-bind", folder, folder] == wrapped[wrapped.index(folder) - 1:][:3]
    assert "--bind" not in wrapped
    assert "--unshare-net" in wrapped and "--unshare-ipc" in wrapped


def test_elevated_never_makes_a_denied_tool_available(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    cfg = make_config(model_server.openai_base_url, tools={"deny": ["shell"], "elevated": True})
    engine = make_engine(tmp_path, cfg)
    assert engine.placement.elevated
    model_server.push(
        Reply(tool_calls=[Call("shell", {"command": "touch y", "elevated": True}, id="c1")]),
        Reply(text="ok"))

    async def body() -> dict[str, Any]:
        await engine.start()
        try:
            return await turn(engine, new_chat(engine), "go")
        finally:
            await engine.close()

    view = asyncio.run(body())
    assert view["status"] == "complete", view
    assert not (tmp_path / "workspace" / "y").exists()
    offered = {t["function"]["name"] for t in model_server.requests[0].body.get("tools", [])}
    assert "shell" not in offered
    result = [m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert result == ["shell is not available to this agent (denied by tools.deny ('shell')), "
                      "so it was not run."]
    with engine.db.read() as conn:
        rows = conn.execute(select(audit).where(audit.c.action == "tool.refused")).all()
    assert [(r.actor, r.detail["tool"]) for r in rows] == [("policy", "shell")]


# -- under bwrap ----------------------------------------------------------------------------

@needs_bwrap
def test_the_workspace_is_writable_inside(workspace: Path) -> None:
    outcome = shell("echo hi > f && cat f", context(workspace, SANDBOXED))
    assert outcome.ok, outcome.output
    assert outcome.output.startswith("hi\n")
    assert (workspace / "f").read_text() == "hi\n"


@needs_bwrap
def test_the_rest_of_the_system_is_read_only(workspace: Path, outside_tmp: Path) -> None:
    probe = Path("/usr") / f"hearth-probe-{uuid.uuid4().hex}"
    try:
        outcome = shell(f"touch {probe}", context(workspace, SANDBOXED))
        assert not outcome.ok and "Read-only file system" in outcome.output
        assert not probe.exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()
    target = outside_tmp / "f"
    outcome = shell(f"echo x > {shlex.quote(str(target))}", context(workspace, SANDBOXED))
    assert not outcome.ok  # /var/tmp is a private empty folder inside: not the host's
    assert "Read-only file system" in outcome.output or "No such file" in outcome.output
    assert not target.exists()


@needs_bwrap
def test_a_sibling_of_the_workspace_cannot_be_written_or_read(workspace: Path,
                                                              sibling: Path) -> None:
    (sibling / "secret.txt").write_text("host secret")
    target = sibling / "f"
    line = (f"cat {shlex.quote(str(sibling / 'secret.txt'))}; "
            f"mkdir -p {shlex.quote(str(sibling))} && echo x > {shlex.quote(str(target))}")
    outcome = shell(line, context(workspace, SANDBOXED))
    assert "host secret" not in outcome.output
    assert not target.exists()
    assert sorted(p.name for p in sibling.iterdir()) == ["secret.txt"]


@needs_bwrap
def test_tmp_inside_is_private(workspace: Path) -> None:
    name = f"/tmp/hearth-private-{uuid.uuid4().hex}"
    try:
        outcome = shell(f"echo inside > {name} && cat {name}", context(workspace, SANDBOXED))
        assert outcome.ok and outcome.output.startswith("inside\n"), outcome.output
        assert not Path(name).exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            Path(name).unlink()


@needs_bwrap
def test_the_host_processes_are_out_of_sight(workspace: Path) -> None:
    outcome = shell(f"kill -0 {os.getpid()}", context(workspace, SANDBOXED))
    assert not outcome.ok
    assert shell(f"kill -0 {os.getpid()}", context(workspace, Placement("off"))).ok


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on localhost that accepts connections; its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


@needs_bwrap
def test_no_network_inside_unless_it_is_on(workspace: Path, listener: int) -> None:
    # bash's own /dev/tcp: no interpreter needed, wherever the test's venv lives (a venv
    # under /tmp is hidden inside the sandbox, whose /tmp is private)
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected"
    offline = shell(probe, context(workspace, SANDBOXED))
    assert not offline.ok and "connected" not in offline.output, offline.output
    online = shell(probe, context(workspace, Placement("bwrap", network=True)))
    assert online.ok and "connected" in online.output, online.output


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


@needs_bwrap
@pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason="no system python3 to probe with")
def test_no_host_service_is_reachable_through_a_unix_socket(workspace: Path,
                                                           outside_tmp: Path) -> None:
    path = str(outside_tmp / "service.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        probe = (f"{SYSTEM_PYTHON} -c \"import socket; "
                 f"socket.socket(socket.AF_UNIX).connect('{path}'); print('connected')\"")
        host = shell(probe, context(workspace, Placement("off")))
        assert host.ok and "connected" in host.output, host.output  # the probe works outside
        outcome = shell(probe, context(workspace, SANDBOXED))
        assert not outcome.ok and "connected" not in outcome.output, outcome.output
    finally:
        server.close()


@needs_bwrap
def test_the_commands_processes_die_with_it_on_timeout(workspace: Path) -> None:
    ctx = context(workspace, SANDBOXED, timeout=1)
    started = time.monotonic()
    outcome = shell("(sleep 2; touch child) & sleep 2; touch after", ctx)
    assert time.monotonic() - started < 1.9
    assert not outcome.ok and "stopped after 1 seconds" in outcome.output
    time.sleep(max(0.0, 3.0 - (time.monotonic() - started)))
    assert not (workspace / "child").exists() and not (workspace / "after").exists()


@needs_bwrap
def test_an_elevated_call_runs_on_the_host_when_allowed(workspace: Path, sibling: Path) -> None:
    target = sibling / "f"
    line = f"echo host > {shlex.quote(str(target))}"
    allowed = context(workspace, Placement("bwrap", network=False, elevated=True))
    contained = shell(line, allowed)  # not elevated: still in the sandbox
    assert not target.exists(), contained.output
    outcome = shell(line, allowed, elevated=True)
    assert outcome.ok, outcome.output
    assert target.read_text() == "host\n"
    assert refused(line, context(workspace, SANDBOXED), elevated=True) == ELEVATED_OFF
