"""The shell's screen: which command lines are worth trying read-only (and so, inside the
sandbox, run without asking in an "ask" chat), and the denylist that refuses a few destructive
commands before anything runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from hearth.engine.reads import queries
from hearth.engine.runtime import Engine
from hearth.privacy.principal import OWNER
from hearth.store import ledger
from hearth.store.schema import approvals, audit
from hearth.tools.base import ToolContext, ToolRefused
from hearth.tools.sandbox import Placement
from hearth.tools.shell import Shell
from hearth.tools.shell_denylist import refusal
from hearth.tools.shell_screen import reads_only
from tests.engine_harness import make_config, make_engine, new_chat, turn
from tests.fakes.model_server import Call, Reply, ScriptedModelServer

DENIED_BY_OWNER = "The owner denied this call, so it was not run. Carry on without it."

# -- reads_only -------------------------------------------------------------------------------

READERS = [
    "ls -la",
    "cat a | grep b",
    "git status",
    "git log --oneline",
    "git --no-pager diff HEAD~1",
    "find . -name x",
    "ls 2>/dev/null",
    "ls >/dev/null 2>&1",
    "ls &>/dev/null",
    "X=1 ls",
    "ls && pwd || echo none",
    "wc -l a; head -n 3 b",
    "sort -r names.txt",
    "grep -rn TODO src | sort | uniq -c",
]

WRITERS = [
    "echo x > f",
    "ls >> f",
    "ls 2> err",
    "ls >/dev/null > f",
    "cat <> f",
    "git commit -m x",
    "git push",
    "git stash",
    "find . -delete",
    r"find . -exec rm {} \;",
    "find . -name x -fprint out",
    "sort -o out in",
    "sort --output=out in",
    "cat $(whoami)",
    "cat `whoami`",
    "X=$(rm x) ls",
    "cat <(rm x)",
    "eval ls",
    "source ./setup.sh",
    "ls; rm x",
    "ls & rm x",
    "ls\nrm x",
    "ls | xargs rm",
    "tee f",
    "ls | tee f",
    "sed -i s/a/b/ f",
    "python -c 'print(1)'",
    "sudo ls",
    "echo 'unbalanced",
    "",
    "   ",
]


SANDBOXED = ToolContext(workspace=Path("/nonexistent"), session_key="k", run_id="r",
                        placement=Placement("bwrap"))
HOST = ToolContext(workspace=Path("/nonexistent"), session_key="k", run_id="r",
                   placement=Placement("off"))


@pytest.mark.parametrize("command", READERS)
def test_plain_readers_are_reads_only_inside_the_sandbox(command: str) -> None:
    assert reads_only(command)
    assert Shell().classify({"command": command}, SANDBOXED) == "reads"
    assert Shell().classify({"command": command}, HOST) == "changes"
    assert Shell().classify({"command": command, "elevated": True}, SANDBOXED) == "changes"


@pytest.mark.parametrize("command", WRITERS)
def test_anything_that_may_write_or_that_the_screen_cannot_read_is_a_change(command: str) -> None:
    assert not reads_only(command)
    assert Shell().classify({"command": command}, SANDBOXED) == "changes"


def test_a_call_without_a_command_is_a_change() -> None:
    assert Shell().classify({}, SANDBOXED) == "changes"


@pytest.mark.parametrize("command", [
    "env rm x",
    "env -i bash -c 'rm x'",
    "uniq in.txt out.txt",
    "tree -o listing.txt",
    "git log --output=log.txt",
    "git diff --output=patch.txt",
    "rg --pre rm x .",
    "./ls",
    "ls > /dev/nullx",
])
def test_writers_hidden_behind_reader_names_are_changes(command: str) -> None:
    assert not reads_only(command)


# -- the denylist -----------------------------------------------------------------------------

DENYLISTED = [
    ("rm -rf /", "it would delete the whole file system or home folder"),
    ("rm -rf ~", "it would delete the whole file system or home folder"),
    ("rm -fr /*", "it would delete the whole file system or home folder"),
    ("rm -rf $HOME", "it would delete the whole file system or home folder"),
    ("rm -r -f /", "it would delete the whole file system or home folder"),
    ("rm --recursive --force /", "it would delete the whole file system or home folder"),
    ("sudo rm -Rf / --no-preserve-root", "it would delete the whole file system or home folder"),
    ("mkfs.ext4 /dev/sda1", "it formats a disk"),
    ("mkfs /dev/sdb", "it formats a disk"),
    ("dd if=/dev/zero of=/dev/sda bs=1M", "it writes straight onto a device"),
    ("echo x > /dev/sda", "it writes straight onto a disk"),
    ("cat img >/dev/nvme0n1", "it writes straight onto a disk"),
    (":(){ :|:& };:", "it is a fork bomb"),
    ("shutdown -h now", "it shuts the machine down"),
    ("reboot", "it shuts the machine down"),
    ("sudo poweroff", "it shuts the machine down"),
    ("chmod -R 777 /", "it changes the ownership or permissions of the whole file system"),
    ("chown -R me /", "it changes the ownership or permissions of the whole file system"),
    ("git push --force origin main", "it force-pushes over a remote history"),
    ("git push -f origin main", "it force-pushes over a remote history"),
    ("ls && git push origin main --force", "it force-pushes over a remote history"),
]


@pytest.mark.parametrize(("command", "why"), DENYLISTED)
def test_each_denylisted_command_is_refused_with_its_sentence(command: str, why: str) -> None:
    assert refusal(command) == f"Refused `{command}`: {why}. Run it yourself if you mean it."


def test_the_refusal_quotes_at_most_80_characters_of_the_command() -> None:
    command = "  reboot " + "x" * 200
    sentence = refusal(command)
    assert sentence is not None
    assert sentence.startswith("Refused `reboot xxx") and f"`{'reboot ' + 'x' * 73}`" in sentence


@pytest.mark.parametrize("command", [
    "rm -rf ./build",
    "rm -rf build/",
    "rm -rf /tmp/x/y",
    "rm -rf ~/projects/old",
    "rm -f /tmp/lock",
    "dd if=disk.img of=copy.img",
    "echo x > /dev/null",
    "chmod -R 755 ./site",
    "git push origin main",
    "git push -u origin feature",
    "git push --tags",
    "cat rebooting-notes.md",
])
def test_near_misses_are_not_refused(command: str) -> None:
    """Deleting a named folder, pushing without force, copying an image: not the denylist's."""
    assert refusal(command) is None


def test_a_line_that_only_mentions_a_denylisted_word_is_not_refused() -> None:
    """The denylist reads the parsed command: `echo reboot` runs echo, not reboot (the old
    word screen refused it), while `echo x; reboot` runs reboot."""
    assert refusal("echo reboot") is None
    assert refusal("grep -c rebooted syslog") is None
    assert refusal("echo x; reboot") is not None


@pytest.mark.parametrize("command", [
    "rm -rf ~/",
    "rm -rf ~/*",
    'rm -rf "$HOME"',
    "rm -rf /*; echo gone",
])
def test_the_same_deletions_spelled_otherwise_are_refused(command: str) -> None:
    assert refusal(command) is not None


@pytest.mark.parametrize("command", [
    "git push origin main && rm -f build.log",
    "git push origin hot-f",
])
def test_a_plain_push_next_to_an_unrelated_dash_f_is_not_a_force_push(command: str) -> None:
    assert refusal(command) is None


def test_the_shell_refuses_a_denylisted_command_before_anything_runs(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, session_key="k", run_id="r")
    with pytest.raises(ToolRefused) as caught:
        asyncio.run(Shell().run({"command": "touch ran && shutdown -h now"}, ctx))
    assert caught.value.sentence == (
        "Refused `touch ran && shutdown -h now`: it shuts the machine down. "
        "Run it yourself if you mean it.")
    assert not (tmp_path / "ran").exists()


# -- through a turn in an "ask" chat ------------------------------------------------------------

def workspace_of(engine: Engine) -> Path:
    return Path(engine.deps.default_workspace)


async def asked_or_ended(engine: Engine, run_id: str, timeout: float = 15) -> list[dict[str, Any]]:
    """The pending approvals once there are some, or [] once the run has ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        pending = await engine.desk.pending()
        if pending:
            return pending
        view = await queries.run_status(engine.db, run_id)
        assert view is not None
        if view["status"] not in ("admitted", "running"):
            return []
        await asyncio.sleep(0.02)
    raise AssertionError("the run neither asked nor ended")


async def ended(engine: Engine, run_id: str, timeout: float = 15) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        view = await queries.run_status(engine.db, run_id)
        assert view is not None
        if view["status"] not in ("admitted", "running"):
            return view
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not end")


def test_a_read_only_command_runs_without_asking_in_an_ask_chat(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    (workspace_of(engine) / "present.txt").write_text("here")
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "ls"}, id="c1")]),
                      Reply(text="listed"))

    async def body() -> dict[str, Any]:
        await engine.start()
        try:
            return await turn(engine, new_chat(engine, trust="ask"), "list")
        finally:
            await engine.close()

    view = asyncio.run(body())
    assert view["status"] == "complete", view
    with engine.db.read() as conn:
        asked = conn.execute(select(approvals)).all()
        calls = ledger.for_run(conn, view["run_id"])
        allowed = conn.execute(select(audit).where(audit.c.action == "tool.allowed")).all()
    assert asked == []
    assert [(c.tool, c.effect, c.status) for c in calls] == [("shell", "reads", "finished")]
    assert [(a.actor, a.detail["reason"]) for a in allowed] == [("policy", "it only reads")]
    result = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert "present.txt" in result[0]["content"] and "[exit code 0]" in result[0]["content"]


def test_a_changing_command_asks_the_owner_and_a_denial_keeps_it_from_running(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "touch x"}, id="c1")]),
                      Reply(text="fine"))

    async def body() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        await engine.start()
        try:
            admitted = await engine.send(new_chat(engine, trust="ask"), "make x", principal=OWNER)
            pending = await asked_or_ended(engine, admitted.run_id)
            for row in pending:
                await engine.desk.decide(row["id"], "deny", None)
            return pending, await ended(engine, admitted.run_id)
        finally:
            await engine.close()

    pending, view = asyncio.run(body())
    assert view["status"] == "complete", view
    assert [(p["tool"], p["effect"], p["target"]) for p in pending] == [
        ("shell", "changes", "touch x")]
    assert not (workspace_of(engine) / "x").exists()
    result = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in result] == [DENIED_BY_OWNER]
    with engine.db.read() as conn:
        calls = ledger.for_run(conn, view["run_id"])
    assert [(c.effect, c.status) for c in calls] == [("changes", "denied")]


def test_a_command_run_through_env_still_asks_the_owner(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    keep = workspace_of(engine) / "keep.txt"
    keep.write_text("mine")
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "env rm keep.txt"})]),
                      Reply(text="ok"))

    async def body() -> list[dict[str, Any]]:
        await engine.start()
        try:
            admitted = await engine.send(new_chat(engine, trust="ask"), "tidy", principal=OWNER)
            pending = await asked_or_ended(engine, admitted.run_id)
            for row in pending:
                await engine.desk.decide(row["id"], "deny", None)
            await ended(engine, admitted.run_id)
            return pending
        finally:
            await engine.close()

    pending = asyncio.run(body())
    assert keep.exists()
    assert [p["tool"] for p in pending] == ["shell"]
