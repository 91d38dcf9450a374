"""The core alone, installed as a user installs it: a fresh virtualenv, `pip install .` with no
extra, then `import hearth`, `hearth gateway` on a free port and a home of its own until
/healthz answers, then the same with a Telegram channel set up, which must refuse to start
with the pip-install sentence (`hearth.extras`), never a traceback.

Standard library only: `.ci/run` runs it before `make test` (`python3 -m
tests.support.core_install`), and tests/test_core_install.py runs the same `check`. The
checkout is copied first (pyproject.toml and src/), so the install leaves no build/ or
egg-info in it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRA_PACKAGES = ("telegram", "slack_sdk", "nio", "aiosmtpd", "psycopg", "opentelemetry.sdk")
TELEGRAM = '[channels.telegram]\nowner_ids = [1]\ntoken = "123:abc"\n'
SENTENCE = "pip install 'hearth[telegram]'"
NO_INDEX = ("NewConnectionError", "Failed to establish a new connection", "ProxyError",
            "Temporary failure in name resolution", "Max retries exceeded",
            "No matching distribution found")  # pip could not reach (or find in) an index


class NoIndex(RuntimeError):
    """pip could not install: no package index reachable here."""


def check(python: str = sys.executable) -> None:
    """Install the core into a fresh virtualenv and prove it; AssertionError says what failed,
    NoIndex that pip could reach no package index."""
    with tempfile.TemporaryDirectory(prefix="hearth-core-") as scratch:
        where = Path(scratch)
        venv = install(python, where)
        bin_dir = venv / "bin"
        _run([str(bin_dir / "python"), "-c", _NO_EXTRAS], "the core imports hearth")
        home = where / "home"
        home.mkdir()
        (home / "config.toml").write_text("")
        serves(bin_dir / "hearth", home)
        (home / "config.toml").write_text(TELEGRAM)
        refuses(bin_dir / "hearth", home)


_NO_EXTRAS = (
    "import importlib.util, hearth, hearth.cli, hearth.web.app\n"
    f"found = [m for m in {EXTRA_PACKAGES!r} if importlib.util.find_spec(m.split('.')[0]) "
    "and importlib.util.find_spec(m)]\n"
    "assert not found, f'the core installed extras: {found}'\n")


def install(python: str, where: Path) -> Path:
    """A virtualenv at `where`/venv with this checkout's core installed (no extra)."""
    source = where / "source"
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = where / "venv"
    _run([python, "-m", "venv", str(venv)], "a virtualenv is made")
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile",
                           "--disable-pip-version-check", str(source)],
                          capture_output=True, text=True, timeout=600, env=_env())
    if done.returncode != 0:
        said = done.stdout + done.stderr
        if any(sign in said for sign in NO_INDEX):
            raise NoIndex(said.strip().splitlines()[-1])
        raise AssertionError(f"pip install . failed:\n{said}")
    return venv


def serves(hearth: Path, home: Path, within: float = 60.0) -> None:
    """`hearth gateway` answers /healthz within `within` seconds; then it is stopped."""
    port = _free_port()
    log = home / "gateway.log"
    with log.open("w") as out:
        gateway = subprocess.Popen([str(hearth), "gateway", "--port", str(port)],
                                   env=_env(home), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=home)
    try:
        deadline = time.monotonic() + within
        while not _healthy(port):
            assert gateway.poll() is None, f"the gateway ended:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no /healthz in {within} s:\n{log.read_text()}"
            time.sleep(0.2)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)


def refuses(hearth: Path, home: Path) -> None:
    """`hearth gateway` with Telegram set up and not installed: exit 2, the sentence, no
    traceback."""
    done = subprocess.run([str(hearth), "gateway", "--port", str(_free_port())],
                          env=_env(home), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=home)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, f"exit {done.returncode}:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert lines and lines[-1].startswith("Hearth cannot start: ") and SENTENCE in lines[-1], \
        done.stderr


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _env(home: Path | None = None) -> dict[str, str]:
    """This environment without Hearth's, a model key's, OpenTelemetry's or a PYTHONPATH
    (which would put the checkout's source before the installed one)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(
        ("HEARTH_", "OPENAI_", "ANTHROPIC_", "OTEL_", "VIRTUAL_ENV"))}
    if home is not None:
        env["HEARTH_HOME"] = str(home)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, f"{what}: failed:\n{done.stdout}{done.stderr}"


def main() -> None:
    begun = time.monotonic()
    check(sys.executable)
    print(f"the core alone installs, serves and refuses Telegram without its extra "
          f"({time.monotonic() - begun:.0f} s)")


if __name__ == "__main__":
    main()
