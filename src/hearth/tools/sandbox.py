"""Placement: where the shell runs. Not which tools exist (policy), nor whether a call may go
ahead (approvals).

With bubblewrap (`bwrap`) installed and the sandbox on, a command runs with the whole system
read-only, the workspace writable, its own process tree, and no network unless `[tools]
network = true`. The places where other programs listen on Unix sockets (/run, /tmp, /var/tmp,
/dev/shm) are empty private folders inside, and the Hearth home (its config, keys, token and
database) is hidden, but for the workspace. Elevated exec, when `[tools] elevated = true`,
lets one call run on the host instead; it is the one escape hatch and it never makes a
denied tool available.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Placement:
    """How this gateway places shell commands."""

    mode: str = "off"  # "bwrap" | "off" | "unavailable" (asked for, but bwrap cannot run)
    network: bool = False
    elevated: bool = False
    hidden: tuple[str, ...] = ()  # folders a sandboxed command must not see (the Hearth home)

    @property
    def sandboxed(self) -> bool:
        return self.mode == "bwrap"


@functools.cache
def bwrap_works() -> bool:
    """Whether bwrap is installed and can make a sandbox here (user namespaces allowed)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    try:
        probe = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--unshare-net", "--die-with-parent", "true"],
            capture_output=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


PRIVATE = ("/tmp", "/var/tmp", "/run", "/dev/shm")


def placement(setting: str, network: bool, elevated: bool,
              hidden: tuple[str, ...] = ()) -> Placement:
    if setting == "off":
        return Placement("off", network, elevated, hidden)
    if bwrap_works():
        return Placement("bwrap", network, elevated, hidden)
    return Placement("unavailable" if setting == "on" else "off", network, elevated, hidden)


def wrap(argv: list[str], workspace: Path, network: bool,
         hidden: tuple[str, ...] = (), memory: tuple[str, str] | None = None) -> list[str]:
    """The command line that runs `argv` inside the sandbox. `memory` is ("read-only" |
    "hide", folder): the memory folder made read-only, or hidden, for a restricted chat's
    command (mounted after the workspace, so it wins over the workspace's writable bind)."""
    folder = str(workspace.resolve())
    sandbox = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for private in (*PRIVATE, *hidden):
        if Path(private).is_dir():
            sandbox += ["--tmpfs", str(Path(private).resolve())]
    sandbox += ["--bind", folder, folder]  # after the tmpfs mounts
    if memory is not None:
        how, path = memory
        sandbox += ["--tmpfs", path] if how == "hide" else ["--ro-bind", path, path]
    sandbox += ["--chdir", folder, "--unshare-pid", "--die-with-parent", "--new-session"]
    if not network:
        sandbox.append("--unshare-net")
    return [*sandbox, "--", *argv]
