"""The shell tool: one command in the workspace, with a timeout and an output cap.

The command runs with the workspace as its working folder and an environment that carries
none of the gateway's secrets. Where it runs is the sandbox's job (`tools.sandbox`), and what
it may do unasked follows from that placement, never from reading the command: a call counts
as a read only when it will run inside the sandbox with the workspace read-only and no
network, where nothing it does can change anything. Its output is read as a stream into a
bounded buffer: past the cap the rest is counted and dropped, so a command that prints a
gigabyte costs the gateway no more memory than one that prints a page.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from typing import Any

from hearth.home import owner_umask
from hearth.tools import fence
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.sandbox import wrap
from hearth.tools.shell_denylist import refusal
from hearth.tools.shell_screen import reads_only

_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR")
_CHUNK = 64 * 1024


def clean_environment(workspace: str) -> dict[str, str]:
    """Only the harmless variables of the gateway's environment, never its keys or token."""
    env = {name: os.environ[name] for name in _KEPT_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = workspace
    env["PWD"] = workspace
    return env


class Shell:
    name = "shell"
    description = (
        "Run a shell command (bash -c) in the workspace folder and return its output "
        "and exit code. Use for commands the file tools cannot do."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run"},
            "timeout": {"type": "integer", "description": "Seconds before it is stopped"},
            "elevated": {"type": "boolean",
                         "description": "Run outside the sandbox (only when allowed)"},
        },
        "required": ["command"],
    }
    effect: Effect = "changes"
    placed: Placed = "command"
    parallel_safe = False

    def classify(self, args: dict[str, Any], ctx: ToolContext) -> Effect:
        """A read only when the call will be placed read-only (see `read_only`)."""
        return "reads" if read_only(args, ctx) else "changes"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        command: str = args["command"]
        if not command.strip():
            raise ToolRefused("The command is empty; say what to run.")
        denied = refusal(command)
        if denied:
            raise ToolRefused(denied)
        asked = args.get("timeout")
        if asked is not None and asked <= 0:
            raise ToolRefused("The timeout must be a positive number of seconds.")
        argv = placed_argv(["bash", "-c", command], args, ctx)
        timeout = float(min(asked or ctx.shell_timeout, ctx.shell_timeout))
        proc = await _spawn(argv, ctx)
        kept = Capped(limit=ctx.output_chars * 4)
        try:
            await asyncio.wait_for(_drain(proc, kept), timeout)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            return _stopped(command, timeout, kept, ctx.output_chars)
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            raise
        code = proc.returncode
        return ToolOutcome(
            output=f"{kept.text(ctx.output_chars)}\n[exit code {code}]",
            receipt=f"Ran `{_short(command)}` (exit {code})"
                    + (" read-only." if read_only(args, ctx) else "."),
            ok=code == 0,
        )


def read_only(args: dict[str, Any], ctx: ToolContext) -> bool:
    """Will this call run where it cannot change anything? Only inside the sandbox (never
    elevated), where the workspace is then mounted read-only with no network; and only for a
    line the screen thinks worth trying that way."""
    if args.get("elevated") or not ctx.placement.sandboxed:
        return False
    return reads_only(str(args.get("command", "")))


def placed_argv(argv: list[str], args: dict[str, Any], ctx: ToolContext) -> list[str]:
    """The command line that runs `argv` where this call is placed, or ToolRefused."""
    placement, elevated = ctx.placement, bool(args.get("elevated"))
    if elevated and not placement.elevated:
        raise ToolRefused("Refused: running outside the sandbox is off here ([tools] elevated "
                          "= false). Run the command without elevated.")
    if placement.mode == "unavailable":
        raise ToolRefused("Refused: the sandbox is on ([tools] sandbox = \"on\") but bwrap "
                          "cannot run here. Install bubblewrap, or set sandbox = \"auto\".")
    if placement.sandboxed and not elevated:
        return wrap(argv, ctx.workspace, placement.network, placement.hidden,
                    memory=fence.sandbox_rule(ctx), read_only=read_only(args, ctx))
    return argv


@dataclass
class Capped:
    """A bounded buffer: the first `limit` bytes kept, the rest only counted."""

    limit: int
    data: bytearray | None = None
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        if self.data is None:
            self.data = bytearray()
        room = self.limit - len(self.data)
        self.data += chunk[:max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self, chars: int) -> str:
        text = bytes(self.data or b"").decode("utf-8", errors="replace")
        if len(text) <= chars and not self.dropped:
            return text
        total = len(self.data or b"") + self.dropped
        return text[:chars] + f"\n[output cut at {chars} characters of {_size(total)}]"


async def _drain(proc: asyncio.subprocess.Process, kept: Capped) -> None:
    assert proc.stdout is not None
    while chunk := await proc.stdout.read(_CHUNK):
        kept.add(chunk)
    await proc.wait()


def _stopped(command: str, timeout: float, kept: Capped, chars: int) -> ToolOutcome:
    printed = kept.text(chars)
    so_far = f"Its output so far:\n{printed}\n" if printed.strip() else ""
    return ToolOutcome(
        output=f"{so_far}The command was stopped after {timeout:g} seconds (its time limit).",
        receipt=f"Ran `{_short(command)}`, stopped after {timeout:g} s.",
        ok=False,
    )


async def _spawn(argv: list[str], ctx: ToolContext) -> asyncio.subprocess.Process:
    """Start the command in a process group of its own. A Stop that lands while it is being
    started waits for the start, then kills the group: no command is left running unowned."""
    # the owner's files, made as the owner would make them: the gateway's umask is private
    # (077), and uvloop's subprocesses take no `umask=`, so a tiny sh sets it and execs
    owned = ["/bin/sh", "-c", f'umask {owner_umask():03o} && exec "$@"', "sh", *argv]
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *owned,
        cwd=ctx.workspace,
        env=clean_environment(str(ctx.workspace)),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    ))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            proc = await starting
            _kill_group(proc.pid)
            await proc.wait()
        raise


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 ** 2:
        return f"{count / 1024:.1f} KB"
    if count < 1024 ** 3:
        return f"{count / 1024 ** 2:.1f} MB"
    return f"{count / 1024 ** 3:.1f} GB"


def _short(command: str, width: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= width else line[: width - 1] + "…"
