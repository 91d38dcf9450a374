"""A sandboxed command holds no capabilities, as root or not: the hole an outside review found,
driven as the attacker drove it, through the shell tool as the gateway runs it.

Before: bwrap run by root (a container, a home server) kept the full capability set for the
command (`CapEff 000001fffeffffff`), so a command placed as a read, with the workspace mounted
read-only, could remount the workspace read-write and unmount the tmpfs that hides the home:
a `LESSOPEN=… less` "read" wrote a file on the host and printed the gateway's token. These
tests fail on the code before `sandbox.NO_PRIVILEGE` (as root: CapEff is not zero, the mounts
give way, `pwned` appears and the token is read).
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from pathlib import Path

import pytest

from hearth.tools.base import ToolContext
from hearth.tools.sandbox import Placement, bwrap_works
from hearth.tools.shell import Shell

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot run here")

TOKEN = "TOKEN-3f9c1e-never-seen-inside"
NONE = "0" * 16


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a file to read, and beside it a Hearth home holding a token."""
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / "notes.txt").write_text("notes\n")
    (home / "token").write_text(TOKEN + "\n")
    return workspace, home


def context(workspace: Path, home: Path) -> ToolContext:
    where = Placement("bwrap", network=True, hidden=(str(home),))
    return ToolContext(workspace=workspace, session_key="k", run_id="r", placement=where)


def run(command: str, ctx: ToolContext, placed: str) -> str:
    """Run `command` through the shell tool, after checking where it is placed."""
    shell = Shell()
    assert shell.classify({"command": command}, ctx) == placed
    return asyncio.run(shell.run({"command": command}, ctx)).output


def status(output: str) -> dict[str, str]:
    """The fields of /proc/self/status printed in `output`."""
    pairs = (line.split(":", 1) for line in output.splitlines() if ":" in line)
    return {name.strip(): value.strip() for name, value in pairs}


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file under the folders, with its contents: what the host holds."""
    return {str(f): f.read_bytes() for folder in folders for f in sorted(folder.rglob("*"))
            if f.is_file()}


def attack_script(workspace: Path, home: Path) -> str:
    """What the review's command ran: undo the mounts, write, read the token. Each step prints
    its name and exit status (on stderr: LESSOPEN takes stdout as a file name)."""
    ws, hidden = shlex.quote(str(workspace)), shlex.quote(str(home))
    unhide = f"umount -l /tmp; umount {hidden}; cat {hidden}/token"
    steps = {
        "remount": f"mount -o remount,rw {ws}",
        "remount-bind": f"mount -o remount,bind,rw {ws}",
        "write": f"echo pwned > {ws}/pwned",
        "umount-home": f"umount {hidden}",
        "umount-tmp": "umount -l /tmp",
        "read-token": f"cat {hidden}/token",
        "nested-userns": f"unshare -Um sh -c {shlex.quote(unhide)}",
    }
    lines = ["exec >&2", *(f'{command}; echo "step {name} $?"' for name, command in steps.items())]
    return "\n".join(lines) + "\n"


def steps(output: str) -> dict[str, int]:
    """Each attack step's exit status, by name."""
    found = (line.split() for line in output.splitlines() if line.startswith("step "))
    return {words[1]: int(words[2]) for words in found if len(words) == 3}


@pytest.mark.parametrize(("command", "placed"), [
    ("cat /proc/self/status", "reads"),
    ("cat /proc/self/status; :", "changes"),  # `; :`: the same command, placed writable
])
def test_a_sandboxed_command_holds_no_capabilities(
        command: str, placed: str, layout: tuple[Path, Path]) -> None:
    """Before: as root, CapEff was 000001fffeffffff in both placements."""
    fields = status(run(command, context(*layout), placed))
    assert fields["CapEff"] == NONE and fields["CapPrm"] == NONE, fields
    assert fields["NoNewPrivs"] == "1"  # so no setuid program hands any back


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
def test_a_read_cannot_undo_its_mounts_write_or_read_the_home(layout: tuple[Path, Path]) -> None:
    """Before (as root): the remount gave the read a writable workspace, `pwned` appeared on
    the host, and the home's tmpfs came off so the token was printed."""
    workspace, home = layout
    (workspace / "attack.sh").write_text(attack_script(workspace, home))
    before = snapshot(workspace, home)
    output = run("LESSOPEN='sh attack.sh %s' less notes.txt", context(workspace, home), "reads")
    done = steps(output)
    assert set(done) == {"remount", "remount-bind", "write", "umount-home", "umount-tmp",
                         "read-token", "nested-userns"}, output
    assert all(code != 0 for code in done.values()), output
    assert TOKEN not in output
    assert snapshot(workspace, home) == before
    assert not (workspace / "pwned").exists()


def test_an_approved_change_cannot_unhide_the_home(layout: tuple[Path, Path]) -> None:
    """A writable command may change the workspace, never undo the mounts that hide the home.
    Before (as root): `umount` took the home's tmpfs off and the token was printed."""
    workspace, home = layout
    (workspace / "attack.sh").write_text(attack_script(workspace, home))
    output = run("sh attack.sh", context(workspace, home), "changes")
    done = steps(output)
    assert all(done[name] != 0 for name in ("umount-home", "umount-tmp", "read-token",
                                            "nested-userns")), output
    assert TOKEN not in output
    assert (home / "token").read_text() == TOKEN + "\n"
