"""Starting `hearth gateway` processes without paying for their imports each time.

A `hearth gateway` started as `python -m hearth gateway` spends most of its start (~0.8 s of a
~1 s start, more on a loaded machine) importing its modules. The tests start hundreds, so
each pytest process keeps one launcher: `python tests/launcher.py`, a process that imports the
gateway's modules once and then, for each gateway asked for, forks a child that becomes the
command: its environment replaced by the one asked for, its umask and working folder the
asker's, stdin /dev/null, stdout and stderr appended to the gateway's log, every other file
closed, then `hearth`'s `__main__` run as `python -m hearth gateway ...` runs it (`sys.argv`
included). The child is a process of its own, as `subprocess.Popen` makes one: a signal, an
`os._exit` at a crash point, its files and its exit code are its own. What it does not repeat
is the interpreter's start and the imports; the test of a cold start is `hearth(...)`
(`tests/support/cli.py`), which still runs `python -m hearth` whole.

`spawn(...)` gives a `Launched`, with the part of `Popen`'s interface the tests use (`pid`,
`returncode`, `poll`, `wait`, `send_signal`, `terminate`, `kill`). The launcher reaps its
children and reports each exit code (negative for a signal, as `Popen` says it) over its
stdout; a thread in the pytest process reads those.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

PRELOAD = ("hearth.cli", "hearth.web.app", "hearth.web.http.server", "hearth.engine.compose",
           "alembic.command", "alembic.config")  # what `hearth gateway` imports, migrations too


# ---------------------------------------------------------------------- the pytest side


class Launched:
    """A gateway process the launcher forked: `Popen`'s interface, as far as tests use it."""

    def __init__(self, launcher: Launcher, pid: int) -> None:
        self.launcher = launcher
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.launcher.exit_code(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.launcher.exit_code(self.pid, timeout=timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["hearth", "gateway"], timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # it ended a moment ago; its code is on the way
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """The pytest process's end of one launcher process."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
        env["PYTHONUNBUFFERED"] = "1"  # as the gateway subprocess always had it
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self._lock = threading.Lock()  # one request at a time
        self._changed = threading.Condition()
        self._started: list[int | str] = []
        self._exits: dict[int, int] = {}
        self._gone = False
        threading.Thread(target=self._read, name="launcher-reader", daemon=True).start()

    def spawn(self, args: list[str], env: dict[str, str], log: Path) -> Launched:
        """`python -m hearth ARGS` with exactly `env`, output appended to `log`."""
        umask = os.umask(0)
        os.umask(umask)
        request = {"args": args, "env": env, "log": str(log), "cwd": os.getcwd(),
                   "umask": umask}
        with self._lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            with self._changed:
                self._changed.wait_for(lambda: self._started or self._gone, timeout=30)
                if not self._started:
                    raise RuntimeError("the gateway launcher did not answer")
                answer = self._started.pop(0)
        if isinstance(answer, str):
            raise RuntimeError(f"the gateway launcher could not fork: {answer}")
        return Launched(self, answer)

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout=timeout)
            if pid not in self._exits and self._gone:
                raise RuntimeError("the gateway launcher ended")
            return self._exits.get(pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # it kills what it still runs and ends
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            said: dict[str, Any] = json.loads(line)
            with self._changed:
                if "exited" in said:
                    self._exits[int(said["exited"])] = int(said["code"])
                else:
                    self._started.append(said.get("started", said.get("error", "?")))
                self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()


_LAUNCHER: list[Launcher] = []
_LAUNCHER_LOCK = threading.Lock()


def spawn(args: list[str], env: dict[str, str], log: Path) -> Launched:
    """A `hearth ARGS` process from this pytest process's launcher (started on first use,
    ended with the process)."""
    with _LAUNCHER_LOCK:
        if not _LAUNCHER or _LAUNCHER[0].proc.poll() is not None:
            import atexit

            _LAUNCHER[:] = [Launcher()]
            atexit.register(_LAUNCHER[0].close)
        launcher = _LAUNCHER[0]
    return launcher.spawn(args, env, log)


# ---------------------------------------------------------------------- the launcher process


def _say(said: dict[str, Any]) -> None:
    os.write(1, json.dumps(said).encode() + b"\n")


def _serve() -> dict[str, Any]:
    """Fork a child per request and report each child's exit; in a child, return its request
    (the parent never returns: it exits when the pytest process closes its stdin)."""
    children: dict[int, int] = {}  # pidfd -> pid
    pending = b""
    while True:
        ready, _, _ = select.select([0, *children], [], [])
        for fd in ready:
            if fd != 0:
                pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _say({"exited": pid, "code": os.waitstatus_to_exitcode(status)})
                continue
            data = os.read(0, 1 << 16)
            if not data:  # the pytest process is gone: so is everything it started
                for pid in children.values():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                os._exit(0)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                try:
                    pid = os.fork()
                except OSError as error:
                    _say({"error": str(error)})
                    continue
                if pid == 0:
                    for child_fd in children:
                        os.close(child_fd)
                    return dict(request)
                children[os.pidfd_open(pid)] = pid
                _say({"started": pid})


def _become(request: dict[str, Any]) -> None:
    """In the child: the process `python -m hearth ARGS` would be, up to running its main."""
    try:
        os.umask(int(request["umask"]))
        os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # as `python -m` has it
        sys.argv = ["hearth", *request["args"]]
    except BaseException:  # noqa: BLE001 - nothing to report to but the exit code
        os._exit(127)


if __name__ == "__main__":
    import importlib
    import runpy

    sys.path[0] = os.getcwd()  # the pytest process's, as `python -m` would have it
    for module in PRELOAD:
        importlib.import_module(module)
    _become(_serve())
    runpy.run_module("hearth", run_name="__main__", alter_sys=True)
