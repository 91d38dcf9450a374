"""An integration set up without its extra: `hearth gateway` refuses to start with one
sentence naming the `pip install 'hearth[…]'` to run, never a traceback (`hearth.extras`).

Each case runs the real command in a process of its own with the extra's packages not
installed (`tests.support.without`); the same without hiding anything is the core's own test
(tests/test_core_install.py, a virtualenv with the core alone).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hearth.extras import EXTRAS, MissingExtra, installed, missing_in, require
from tests.gateway import free_port

ROOT = Path(__file__).resolve().parents[1]
CASES = {  # extra: (the config.toml that sets it up, the packages hidden, extra environment)
    "telegram": ('[channels.telegram]\nowner_ids = [1]\ntoken = "123:abc"\n', "telegram", {}),
    "slack": ('[channels.slack]\nbot_token = "xoxb-1"\nsigning_secret = "s"\n', "slack_sdk", {}),
    "matrix": ('[channels.matrix]\nhomeserver = "https://matrix.example.org"\n'
               'user_id = "@bot:example.org"\naccess_token = "t"\n', "nio", {}),
    "email": ('[channels.email]\naddress = "agent@example.org"\nlisten_port = 0\n',
              "aiosmtpd", {}),
    "telemetry": ('[telemetry]\notlp_endpoint = "http://127.0.0.1:4318"\n',
                  "opentelemetry.sdk,opentelemetry.exporter", {}),
    "postgres": ("", "psycopg",
                 {"HEARTH_DATABASE_URL": "postgresql+psycopg://hearth@127.0.0.1:9/hearth"}),
}


def sentence(extra: str) -> str:
    return f"pip install 'hearth[{extra}]'"


def start_without(hidden: str, config: str, home: Path,
                  env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`hearth gateway` on a free port and `home`, with `hidden`'s packages not installed."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_", "OTEL_"))}
    clean.update(HEARTH_HOME=str(home), **env)
    return subprocess.run([sys.executable, "-m", "tests.support.without", hidden, "--",
                           "gateway", "--port", str(free_port())], cwd=ROOT, env=clean,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("extra", sorted(CASES))
def test_set_up_without_its_extra_the_gateway_says_what_to_install(extra: str,
                                                                   tmp_path: Path) -> None:
    config, hidden, env = CASES[extra]
    done = start_without(hidden, config, tmp_path / "home", env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1] == f"Hearth cannot start: {MissingExtra(extra)}", done.stderr
    assert sentence(extra) in lines[-1]
    assert "Hearth is serving" not in done.stderr


def test_without_the_integration_set_up_its_missing_extra_is_never_asked_for(
        tmp_path: Path) -> None:
    """Every extra hidden at once and none set up: the gateway starts (it is not refused)."""
    hidden = ",".join(hide for _, hide, _ in CASES.values())
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_", "OTEL_"))}
    clean["HEARTH_HOME"] = str(home)
    process = subprocess.Popen([sys.executable, "-m", "tests.support.without", hidden, "--",
                                "gateway", "--port", str(free_port())], cwd=ROOT, env=clean,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        said = [process.stderr.readline()]
        while said[-1] and "Hearth is serving" not in said[-1]:
            said.append(process.stderr.readline())
        assert "Hearth is serving" in said[-1], "".join(said)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_sentence_names_what_is_set_up_and_the_pip_install_to_run() -> None:
    assert str(MissingExtra("telegram")) == (
        "the Telegram channel is set up ([channels.telegram] in config.toml), but its package "
        "is not installed: run pip install 'hearth[telegram]' (from a clone: make run "
        "EXTRAS=telegram).")


def test_require_passes_for_what_is_installed_and_installed_finds_only_that() -> None:
    for extra in EXTRAS:
        require(extra)  # the dev install has every extra
    assert installed("telegram.constants")
    assert not installed("hearth_no_such_package")
    assert not installed("hearth_no_such_package.inside")  # its parent is missing


def test_a_missing_package_found_by_import_is_named_by_its_extra() -> None:
    for name, extra in (("nio", "matrix"), ("aiohttp", "matrix"), ("slack_sdk.errors", "slack"),
                        ("opentelemetry", "telemetry"), ("psycopg", "postgres")):
        found = missing_in(ModuleNotFoundError(name=name))
        assert found is not None and found.extra == extra, name
    assert missing_in(ModuleNotFoundError(name="left_pad")) is None
