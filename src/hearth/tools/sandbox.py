"""Placement: where a command runs, and what it can reach there. Not which tools exist
(policy), nor whether a call may go ahead (the gate).

With bubblewrap (`bwrap`) installed and the sandbox on, a command runs with the system's
programs and libraries read-only, its own process tree, and no network unless `[tools]
network = true`. It does not see the people on the machine: `/home`, `/root`, mail and spool
folders are empty inside, and so are the places where other programs listen on Unix sockets
(/run, /tmp, /var/tmp, /dev/shm); the secrets under `/etc` (password hashes, SSH host keys)
read as empty files. The Hearth home (its config, keys, token and database) is hidden,
whatever the workspace: a workspace inside it is shown, and the home is hidden again inside a
workspace that contains it.

A sandboxed command holds no capabilities, as root or not (`NO_PRIVILEGE`): bwrap run by root
would otherwise hand it the full set, and with it `mount` and `umount` to undo every mount
above. Its capabilities are dropped (`--cap-drop ALL`), its bounding set emptied in a user
namespace of its own, and it runs with no_new_privs (which bwrap always sets and nothing can
clear), so no setuid program gives any back; a user namespace it makes inside gets only mounts
the kernel has locked together and read-only.

Two ways to place a sandboxed command:
- **writable**: the workspace is mounted read-write (a call the gate let through as a change);
- **read-only**: the workspace is mounted read-only, and there is no network and no shared
  IPC. Nothing the command does can change the workspace, the system or anything it could
  reach over a socket, which is what lets the gate run it without asking (`read_only_argv`).

Without the sandbox nothing is placed: every command runs on the host with the gateway's
rights, so every command counts as a change (`Placement.why` says why there is no sandbox).
Elevated exec, when `[tools] elevated = true`, lets one call run on the host instead; it is the
one escape hatch and it never makes a denied tool available.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Placement:
    """How this gateway places shell commands."""

    mode: str = "off"  # "bwrap" | "off" | "unavailable" (asked for, but bwrap cannot run)
    network: bool = False
    elevated: bool = False
    hidden: tuple[str, ...] = ()  # folders a sandboxed command must not see (the Hearth home)
    why: str = field(default="", compare=False)  # when not sandboxed: the reason, in a sentence

    @property
    def sandboxed(self) -> bool:
        return self.mode == "bwrap"

    def describe(self) -> str:
        """One line for the start line, /healthz and the Settings page."""
        if self.sandboxed:
            net = "network on" if self.network else "no network"
            return f"sandboxed with bwrap ({net}); read-only commands run without asking"
        if self.mode == "unavailable":
            return f"refused: sandbox = \"on\" but {self.why or 'bwrap cannot run here'}"
        return (f"NOT sandboxed: {self.why or 'the sandbox is off'}; every shell command "
                "is asked, and Incognito and Temporary chats have no shell")


# every sandboxed command, read or write: no capabilities, and an empty bounding set (in a
# user namespace of its own wherever one can be made) so that nothing it runs regains any
NO_PRIVILEGE = ("--unshare-user-try", "--cap-drop", "ALL")


@functools.cache
def bwrap_problem() -> str | None:
    """Why bwrap cannot make a sandbox here, or None when it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bwrap is not installed (install bubblewrap)"
    try:
        probe = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--unshare-net", "--unshare-ipc", *NO_PRIVILEGE, "--die-with-parent", "true"],
            capture_output=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be started ({type(exc).__name__})"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason"]
        return f"bwrap cannot make a sandbox here ({said[0][:160]})"
    return None


@functools.cache
def bwrap_works() -> bool:
    """Whether bwrap is installed and can make a sandbox here (user namespaces allowed)."""
    return bwrap_problem() is None


PRIVATE = ("/tmp", "/var/tmp", "/run", "/dev/shm")
PEOPLE = ("/home", "/root", "/var/mail", "/var/spool", "/mnt", "/media")
SECRET_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                "/etc/sudoers", "/etc/security/opasswd")


def placement(setting: str, network: bool, elevated: bool,
              hidden: tuple[str, ...] = ()) -> Placement:
    if setting == "off":
        return Placement("off", network, elevated, hidden,
                         why='[tools] sandbox = "off" in config.toml')
    if bwrap_works():
        return Placement("bwrap", network, elevated, hidden)
    why = bwrap_problem() or "bwrap cannot run here"
    return Placement("unavailable" if setting == "on" else "off", network, elevated, hidden,
                     why=why)


def wrap(argv: list[str], workspace: Path, network: bool,
         hidden: tuple[str, ...] = (), memory: tuple[str, str] | None = None,
         read_only: bool = False) -> list[str]:
    """The command line that runs `argv` inside the sandbox. `memory` is ("read-only" |
    "hide", folder): the memory folder made read-only, or hidden, for a restricted chat's
    command (mounted after the workspace, so it wins over the workspace's writable bind).
    `read_only` mounts the workspace read-only, with no network and no shared IPC."""
    folder = Path(os.path.realpath(workspace))
    sandbox = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    sandbox += _emptied((*PRIVATE, *PEOPLE, *hidden))
    for secret in (*SECRET_FILES, *_ssh_keys()):
        if os.path.isfile(secret):
            sandbox += ["--ro-bind", "/dev/null", secret]
    sandbox += ["--ro-bind" if read_only else "--bind", str(folder), str(folder)]
    inside = tuple(h for h in hidden if _within(Path(os.path.realpath(h)), folder))
    sandbox += _emptied(inside)  # the home, hidden again inside a workspace that holds it
    if memory is not None and not any(_within(Path(memory[1]), Path(h)) for h in inside):
        how, path = memory
        sandbox += ["--tmpfs", path] if how == "hide" else ["--ro-bind", path, path]
    sandbox += ["--chdir", str(folder), "--unshare-pid", "--die-with-parent", "--new-session",
                *NO_PRIVILEGE]
    if read_only:
        sandbox += ["--unshare-ipc", "--unshare-uts"]
    if read_only or not network:
        sandbox.append("--unshare-net")
    return [*sandbox, "--", *argv]


def _emptied(folders: tuple[str, ...]) -> list[str]:
    """tmpfs mounts over each folder that exists (its contents vanish inside)."""
    mounts: list[str] = []
    for folder in folders:
        real = os.path.realpath(folder)
        if os.path.isdir(real):
            mounts += ["--tmpfs", real]
    return mounts


def _ssh_keys() -> list[str]:
    """The host's SSH private keys (/etc/ssh/ssh_host_*_key), each shown empty inside."""
    try:
        names = os.listdir("/etc/ssh")
    except OSError:
        return []
    return sorted(f"/etc/ssh/{n}" for n in names if n.startswith("ssh_host_") and
                  n.endswith("_key"))


def _within(path: Path, folder: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == folder or folder in real.parents
