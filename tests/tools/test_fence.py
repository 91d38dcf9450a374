"""The privacy fence around tools: the memory folder and lasting work, per memory mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hearth.privacy.scope import as_work_of
from hearth.tools import fence
from hearth.tools.base import Tool, ToolContext
from hearth.tools.edit import EditFile
from hearth.tools.files import ListDir, ReadFile, WriteFile
from hearth.tools.sandbox import Placement, bwrap_works
from hearth.tools.search import Glob, Grep
from hearth.tools.shell import Shell


@pytest.fixture
def fenced(tmp_path: Path) -> ToolContext:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "MEMORY.md").write_text("# Memory\nthe owner likes kites\n")
    (workspace / "notes.txt").write_text("kites are fun\n")
    (workspace / "alias").symlink_to(workspace / "memory" / "MEMORY.md")
    placement = Placement("bwrap") if bwrap_works() else Placement()
    return ToolContext(workspace=workspace, session_key="chat-1", run_id="r",
                       memory_dir=workspace / "memory", placement=placement)


def _verdict(tool: Tool, args: dict[str, Any], ctx: ToolContext, mode: str | None) -> str | None:
    if mode is None:
        return fence.refusal(tool, args, ctx)
    with as_work_of("chat-1", mode):
        return fence.refusal(tool, args, ctx)


CHANGES = [
    (WriteFile(), {"path": "memory/MEMORY.md", "content": "x"}),
    (WriteFile(), {"path": "memory/new.md", "content": "x"}),
    (EditFile(), {"path": "memory/MEMORY.md", "old_text": "a", "new_text": "b"}),
    (Shell(), {"command": "echo x >> memory/MEMORY.md"}),
    (Shell(), {"command": "cd memory && rm -f MEMORY.md"}),
    (Shell(), {"command": "cp notes.txt mem*/"}),
]
READS = [
    (ReadFile(), {"path": "memory/MEMORY.md"}),
    (ReadFile(), {"path": "alias"}),  # a symlink into the folder
    (ListDir(), {"path": "memory"}),
    (Grep(), {"pattern": "kites", "path": "memory"}),
    (Glob(), {"pattern": "*.md", "path": "memory"}),
    (Shell(), {"command": "cat memory/MEMORY.md"}),
]


@pytest.mark.parametrize(("tool", "args"), CHANGES)
def test_a_change_to_the_memory_folder_is_refused_to_every_restricted_mode(
        tool: Tool, args: dict[str, Any], fenced: ToolContext) -> None:
    assert _verdict(tool, args, fenced, None) is None  # the gateway's own work
    assert _verdict(tool, args, fenced, "persistent") is None  # the positive control
    assert "Incognito" in str(_verdict(tool, args, fenced, "incognito"))
    assert "Temporary" in str(_verdict(tool, args, fenced, "temporary"))
    assert "cannot be read" in str(_verdict(tool, args, fenced, "???"))


@pytest.mark.parametrize(("tool", "args"), READS)
def test_a_read_of_the_memory_folder_is_refused_only_where_nothing_is_read(
        tool: Tool, args: dict[str, Any], fenced: ToolContext) -> None:
    assert _verdict(tool, args, fenced, "persistent") is None
    assert _verdict(tool, args, fenced, "incognito") is None
    assert "Temporary" in str(_verdict(tool, args, fenced, "temporary"))


@pytest.mark.parametrize("command", ["echo hello > out.txt", "ls -la", "python3 -V",
                                     "grep -r memoryless notes.txt"])
def test_commands_that_name_no_memory_path_pass(command: str, fenced: ToolContext) -> None:
    assert _verdict(Shell(), {"command": command}, fenced, "incognito") is None


def test_elevated_exec_is_refused_to_restricted_work(fenced: ToolContext) -> None:
    args = {"command": "ls", "elevated": True}
    assert _verdict(Shell(), args, fenced, "persistent") is None
    assert "outside the sandbox" in str(_verdict(Shell(), args, fenced, "incognito"))


def test_listings_and_searches_leave_the_folder_out_where_nothing_is_read(
        fenced: ToolContext) -> None:
    async def outputs() -> list[str]:
        return [(await ListDir().run({}, fenced)).output,
                (await Glob().run({"pattern": "**/*.md"}, fenced)).output,
                (await Grep().run({"pattern": "kites"}, fenced)).output]

    listing, globbed, grepped = asyncio.run(outputs())
    assert "memory/" in listing and "MEMORY.md" in globbed and "likes kites" in grepped
    with as_work_of("chat-1", "temporary"):
        listing, globbed, grepped = asyncio.run(outputs())
    assert "memory" not in listing and "MEMORY.md" not in globbed
    assert "likes kites" not in grepped and "kites are fun" in grepped


@pytest.mark.skipif(not bwrap_works(), reason="needs bubblewrap")
def test_the_sandbox_holds_what_the_screen_cannot_read(fenced: ToolContext) -> None:
    disguised = {"command": "d=$(printf 'mem%s' ory); echo leak >> $d/MEMORY.md; cat $d/MEMORY.md"}
    before = (fenced.workspace / "memory" / "MEMORY.md").read_text()

    async def shell() -> str:
        return (await Shell().run(disguised, fenced)).output

    with as_work_of("chat-1", "incognito"):
        read_only = asyncio.run(shell())
    assert "Read-only file system" in read_only and "likes kites" in read_only
    with as_work_of("chat-1", "temporary"):
        hidden = asyncio.run(shell())
    assert "likes kites" not in hidden
    assert (fenced.workspace / "memory" / "MEMORY.md").read_text() == before
    with as_work_of("chat-1", "persistent"):  # the positive control: the same command writes
        asyncio.run(shell())
    assert "leak" in (fenced.workspace / "memory" / "MEMORY.md").read_text()
