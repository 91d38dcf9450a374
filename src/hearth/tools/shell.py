"""The shell tool: one command in the workspace, with a timeout and an output cap.

The command runs with the workspace as its working folder and an environment that carries
none of the gateway's secrets. It is not a sandbox: where it runs is the sandbox's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from hearth.tools import fence
from hearth.tools.base import Effect, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.sandbox import wrap
from hearth.tools.shell_screen import reads_only, refusal

_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR")


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
    parallel_safe = False

    def classify(self, args: dict[str, Any]) -> Effect:
        """A command line the screen reads as read-only counts as a read."""
        return "reads" if reads_only(str(args.get("command", ""))) else "changes"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        command: str = args["command"]
        if not command.strip():
            raise ToolRefused("The command is empty; say what to run.")
        denied = refusal(command)
        if denied:
            raise ToolRefused(denied)
        argv = _placed(["bash", "-c", command], ctx, bool(args.get("elevated")))
        asked = args.get("timeout")
        if asked is not None and asked <= 0:
            raise ToolRefused("The timeout must be a positive number of seconds.")
        timeout = float(min(asked or ctx.shell_timeout, ctx.shell_timeout))
        proc = await _spawn(argv, ctx)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            short = _short(command)
            return ToolOutcome(
                output=f"The command was stopped after {timeout:g} seconds (its time limit).",
                receipt=f"Ran `{short}`, stopped after {timeout:g} s.",
                ok=False,
            )
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            raise
        text = out.decode("utf-8", errors="replace")
        if len(text) > ctx.output_chars:
            text = text[: ctx.output_chars] + f"\n[output cut at {ctx.output_chars} characters]"
        code = proc.returncode
        return ToolOutcome(
            output=f"{text}\n[exit code {code}]",
            receipt=f"Ran `{_short(command)}` (exit {code}).",
            ok=code == 0,
        )


async def _spawn(argv: list[str], ctx: ToolContext) -> asyncio.subprocess.Process:
    """Start the command in a process group of its own. A Stop that lands while it is being
    started waits for the start, then kills the group: no command is left running unowned."""
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv,
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


def _placed(argv: list[str], ctx: ToolContext, elevated: bool) -> list[str]:
    placement = ctx.placement
    if elevated and not placement.elevated:
        raise ToolRefused("Refused: running outside the sandbox is off here ([tools] elevated "
                          "= false). Run the command without elevated.")
    if placement.mode == "unavailable":
        raise ToolRefused("Refused: the sandbox is on ([tools] sandbox = \"on\") but bwrap "
                          "cannot run here. Install bubblewrap, or set sandbox = \"auto\".")
    if placement.sandboxed and not elevated:
        return wrap(argv, ctx.workspace, placement.network, placement.hidden,
                    memory=fence.sandbox_rule(ctx))
    return argv


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _short(command: str, width: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= width else line[: width - 1] + "…"
