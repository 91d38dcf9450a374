"""The `hearth` command as a user runs it: subprocesses against a real gateway subprocess."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import segno
import typer
from typer.testing import CliRunner

from hearth import __version__ as hearth_version
from hearth.cli import app
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, free_port, kinds, write_config
from tests.support.cli import hearth

ANSWER = "Hello from the fake."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Gateway, ScriptedModelServer]]:
    """One gateway for the module (starting one per test would make the file slow)."""
    with ScriptedModelServer() as server:
        server.default = Reply(text=ANSWER)
        home = tmp_path_factory.mktemp("cli-gateway") / "home"
        write_config(home, server.openai_base_url)
        gateway = Gateway(home).start()
        try:
            yield gateway, server
        finally:
            gateway.kill()


@pytest.fixture
def api(served: tuple[Gateway, ScriptedModelServer]) -> Iterator[Api]:
    client = served[0].client()
    yield client
    client.http.close()


def test_hearth_token_prints_the_token(home: Path) -> None:
    done = hearth("token", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == TOKEN


def test_hearth_token_makes_a_private_token(home: Path) -> None:
    first = hearth("token", home=home, token=None)
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip()
    assert len(token) >= 32
    assert (home / "token").read_text().strip() == token
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600


HALF_BLOCKS = {" ": (False, False), "\u2580": (True, False), "\u2584": (False, True),
               "\u2588": (True, True)}  # a character: its (top, bottom) modules, light or not


def light_modules(lines: list[str]) -> list[list[bool]]:
    """The modules a QR code drawn in half blocks shows, row by row (light: True)."""
    rows: list[list[bool]] = []
    for line in lines:
        pairs = [HALF_BLOCKS[char] for char in line]
        rows += [[top for top, _ in pairs], [bottom for _, bottom in pairs]]
    return rows


def test_token_link_prints_the_token_a_link_and_its_qr_code(home: Path) -> None:
    done = hearth("token", "--link", "--url", "http://192.168.1.20:8765/", home=home)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == TOKEN  # the token first, alone on its line, as without --link
    (link,) = [line for line in lines if "/signin/link/" in line]
    assert re.fullmatch(r"http://192\.168\.1\.20:8765/signin/link/[A-Za-z0-9_-]{22}", link)
    drawn = [line for line in lines if line and set(line) <= set(HALF_BLOCKS)]
    expected = [[not dark for dark in row]
                for row in segno.make(link, error="m").matrix_iter(scale=1, border=4)]
    assert light_modules(drawn)[:len(expected)] == expected  # the code of that very link
    assert "\x1b[" not in done.stdout  # no colours where the output is not a terminal
    assert "own address" not in done.stdout


def test_token_link_on_this_machines_address_says_a_phone_cannot_open_it(home: Path) -> None:
    done = hearth("token", "--link", home=home, extra_env={"HEARTH_PORT": "9123"})
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "http://127.0.0.1:9123/signin/link/" in said
    assert "127.0.0.1 is this machine's own address: a phone cannot open it" in said
    assert "--url http://192.168.1.20:9123" in said


@pytest.mark.parametrize("args", [["--url", "http://192.168.1.20:8765"],
                                  ["--link", "--url", "ftp://192.168.1.20"],
                                  ["--link", "--url", "http://host:port"]])
def test_token_refuses_a_url_it_cannot_use_printing_nothing(home: Path, args: list[str]) -> None:
    done = hearth("token", *args, home=home)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "--url" in done.stderr


def test_chat_m_prints_the_streamed_answer(
        served: tuple[Gateway, ScriptedModelServer], home: Path) -> None:
    gateway, _server = served
    done = hearth("chat", "-m", "hi", "--url", gateway.url, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ANSWER}\n"


def test_a_named_session_is_made_then_continued(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, server = served
    first = hearth("chat", "-m", "first words", "--session", "mychat", "--url", gateway.url,
                   home=home)
    assert first.returncode == 0, first.stderr
    assert ANSWER in first.stdout
    second = hearth("chat", "-m", "second words", "--session", "mychat", "--url", gateway.url,
                    home=home)
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"{ANSWER}\n"
    second_call = next(r for r in reversed(server.calls("/v1/chat/completions"))
                       if r.messages and r.messages[-1].get("content") == "second words")
    sent = [m for m in second_call.messages if m["role"] != "system"]
    assert sent == [
        {"role": "user", "content": "first words"},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "second words"},
    ]
    messages = api.messages("mychat")
    assert kinds(messages) == ["user", "assistant", "user", "assistant"]
    assert [m["text"] for m in messages][::2] == ["first words", "second words"]


def test_a_turn_that_ends_in_an_error_prints_its_sentence_and_exits_1(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, server = served
    server.push(Reply(text="partial answer", cut_after=1))
    done = hearth("chat", "-m", "x", "--session", "broken", "--url", gateway.url, home=home)
    assert done.returncode == 1, (done.stdout, done.stderr)
    notices = [m for m in api.messages("broken") if m["kind"] == "notice"]
    assert len(notices) == 1
    ending = notices[0]["meta"]["ending"]
    assert ending == "cut_off"
    assert f"[{ending}] {notices[0]['text']}" in done.stdout


def test_chat_without_a_gateway_exits_3_saying_how_to_start_it(home: Path) -> None:
    done = hearth("chat", "-m", "x", "--url", "http://127.0.0.1:9", home=home)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "hearth gateway" in done.stderr
    assert "127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr


def test_chat_with_no_gateway_at_its_port_names_the_url_hearth_port_and_url_option(
        home: Path) -> None:
    """Without --url the chat goes to HEARTH_PORT's port; nothing there: the sentence says
    which address it tried and the two ways to point it elsewhere."""
    port = free_port()  # nothing listens there
    done = hearth("chat", "-m", "x", home=home, extra_env={"HEARTH_PORT": str(port)})
    assert done.returncode == 3, (done.stdout, done.stderr)
    said = " ".join(done.stderr.split())
    assert f"Cannot reach the Hearth gateway at http://127.0.0.1:{port} " in said, said
    assert "set HEARTH_PORT to that port" in said and "give it with --url" in said, said
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["status"], ["jobs", "list"], ["apps", "list"],
                                     ["export", "--all", "--out", "-"]])
def test_every_client_command_says_the_same_when_no_gateway_answers(
        home: Path, command: list[str]) -> None:
    port = free_port()
    done = hearth(*command, home=home, extra_env={"HEARTH_PORT": str(port)})
    assert done.returncode == 3, (done.stdout, done.stderr)
    said = " ".join(done.stderr.split())
    assert f"Cannot reach the Hearth gateway at http://127.0.0.1:{port} " in said, said
    assert "HEARTH_PORT" in said and "--url" in said, said


def test_a_gateway_listening_on_every_address_is_called_at_this_machines(home: Path) -> None:
    """`host = "0.0.0.0"` is where the gateway listens, not an address to call."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[gateway]\nhost = "0.0.0.0"\n', encoding="utf-8")
    port = free_port()
    done = hearth("status", home=home, extra_env={"HEARTH_PORT": str(port)})
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert f"http://127.0.0.1:{port}" in done.stderr, done.stderr


def test_the_repl_answers_each_line_until_exit(
        served: tuple[Gateway, ScriptedModelServer], api: Api, home: Path) -> None:
    gateway, _server = served
    done = hearth("chat", "--url", gateway.url, home=home, stdin="hello\n\nagain\n/exit\nlost\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(ANSWER) == 2
    key = done.stderr.split("hearth chat --session ", 1)[1].split("`")[0]
    messages = api.messages(key)
    assert kinds(messages) == ["user", "assistant", "user", "assistant"]
    assert [m["text"] for m in messages][::2] == ["hello", "again"]


def test_chat_finds_the_gateway_from_hearth_port(
        served: tuple[Gateway, ScriptedModelServer], home: Path) -> None:
    """Without --url the CLI goes where the configuration says; HEARTH_PORT beats the file."""
    gateway, _server = served
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[gateway]\nport = 9\n", encoding="utf-8")
    done = hearth("chat", "-m", "hi", home=home, extra_env={"HEARTH_PORT": str(gateway.port)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ANSWER}\n"


# ---------------------------------------------------------------------------------- the command


def test_version_prints_the_version(home: Path) -> None:
    done = hearth("--version", home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"hearth {hearth_version}\n"


TYPE_TAG = re.compile(r"<(?:bool|str|int|float|path|text|integer)>", re.I)


def command_paths() -> list[list[str]]:
    """Every command and group of `hearth`, as the words that name it."""
    found: list[list[str]] = [[]]

    def walk(group: Any, path: list[str]) -> None:
        for name, command in group.commands.items():
            found.append([*path, name])
            if hasattr(command, "commands"):
                walk(command, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_no_help_shows_a_type_tag() -> None:
    """Before: typer showed `<bool>` after every flag and `<str>`/`<int>` after each value."""
    runner = CliRunner()
    paths = command_paths()
    assert ["chat"] in paths and ["db", "upgrade"] in paths and ["tools", "explain"] in paths
    for path in paths:
        shown = runner.invoke(app, [*path, "--help"], terminal_width=100)
        assert shown.exit_code == 0, (path, shown.output)
        assert "--help" in shown.output
        assert not TYPE_TAG.search(shown.output), (path, shown.output)


def test_positive_control_typers_own_help_has_type_tags() -> None:
    plain = typer.Typer()

    @plain.command()
    def run(verbose: bool = False, port: int = 1) -> None:
        """Run."""

    shown = CliRunner().invoke(plain, ["--help"], terminal_width=100)
    assert TYPE_TAG.search(shown.output), shown.output


def test_chat_help_names_each_options_value(home: Path) -> None:
    done = hearth("chat", "--help", home=home, extra_env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert re.search(r"--session\s+KEY", done.stdout), done.stdout
    assert re.search(r"--url\s+URL", done.stdout), done.stdout
    assert not TYPE_TAG.search(done.stdout), done.stdout


# ---------------------------------------------------------------------------------- the gateway


def start_gateway(home: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    write_config(home, None)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
    env.update({"HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1",
                "HEARTH_OLLAMA_URL": "http://127.0.0.1:9"})
    proc = subprocess.Popen([sys.executable, "-m", "hearth", "gateway", "--port", str(port),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    return proc, port


def output_until(proc: subprocess.Popen[str], line_start: str) -> list[str]:
    """The gateway's lines up to the first that starts with `line_start` (then it stops)."""
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(line_start):
                break
        else:
            raise AssertionError(f"the gateway ended first: {lines}")
        return lines
    finally:
        proc.terminate()
        lines += proc.stdout.read().splitlines()  # (not communicate: it skips what is buffered)
        proc.wait(30)


def test_the_start_says_where_it_serves_and_logs_no_library_chatter(home: Path) -> None:
    """A first start migrates the database: before, each Alembic step was an INFO line."""
    proc, port = start_gateway(home)
    serving = f"Hearth is serving on http://127.0.0.1:{port} — open it and sign in with the " \
              "token `hearth token` prints."
    lines = output_until(proc, "Hearth is serving")
    assert serving in lines
    assert any(line.startswith("Shell: ") for line in lines)
    assert not [line for line in lines if "alembic" in line or "httpx" in line], lines
    assert not [line for line in lines if line.startswith("INFO:")], lines  # uvicorn's banner


def test_verbose_logs_the_libraries_too(home: Path) -> None:
    proc, _port = start_gateway(home, "--verbose")
    lines = output_until(proc, "Hearth is serving")
    assert [line for line in lines if "alembic.runtime.migration" in line], lines


ROOT = Path(__file__).resolve().parents[1]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="`make run` needs make")


def make_run(*args: str) -> list[str]:
    """`make run ARGS` in the clone, its install taken as done (`-o`: the tests' own venv is
    installed), with the `hearth` of the venv running the tests."""
    return ["make", "-s", "-o", ".venv/.installed", "run", f"BIN={Path(sys.executable).parent}",
            *args]


def make_env() -> dict[str, str]:
    """This process's environment less what would change what make does (a PORT of the
    shell's, a calling make's flags) or what the gateway reads."""
    return {k: v for k, v in os.environ.items() if k != "PORT" and not k.startswith(
        ("HEARTH_", "OPENAI_", "ANTHROPIC_", "MAKE"))}


@needs_make
def test_make_run_without_port_starts_the_gateway_as_before() -> None:
    planned = subprocess.run([*make_run(), "-n"], cwd=ROOT, env=make_env(), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    assert planned[-1] == f"{Path(sys.executable).parent}/hearth gateway"


@needs_make
def test_make_run_port_serves_on_that_port(home: Path) -> None:
    write_config(home, None)
    port = free_port()
    env = {**make_env(), "HEARTH_HOME": str(home), "HEARTH_TOKEN": TOKEN,
           "PYTHONUNBUFFERED": "1", "HEARTH_OLLAMA_URL": "http://127.0.0.1:9"}
    proc = subprocess.Popen(make_run(f"PORT={port}"), cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # make and the gateway: one group to stop
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Hearth is serving"):
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert f"Hearth is serving on http://127.0.0.1:{port} — open it and sign in with the " \
           "token `hearth token` prints." in lines, lines


def test_a_busy_port_is_one_sentence_naming_the_setting(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, _ = start_gateway(home)  # on another port: only its home is used
        proc.kill()
        proc.wait()
        done = hearth("gateway", "--port", str(port), home=home)
    assert done.returncode != 0
    said = (done.stdout + done.stderr).strip()
    assert said.count("\n") == 0, said  # one sentence, and no "serving" line before it
    assert f"Port {port} on 127.0.0.1 is already in use" in said
    assert "`port` under [gateway] in config.toml" in said and "HEARTH_PORT" in said
    assert "serving" not in said


def test_a_database_that_cannot_be_reached_stops_the_start_naming_it_without_its_password(
        home: Path) -> None:
    port = free_port()  # nothing listens there
    done = hearth("gateway", "--port", str(free_port()), home=home, extra_env={
        "HEARTH_DATABASE_URL": f"postgresql+psycopg://hearth:s3cret-pw@127.0.0.1:{port}/db"})
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"postgresql+psycopg://hearth:***@127.0.0.1:{port}/db cannot be reached" in said
    assert "s3cret-pw" not in said and "Traceback" not in said
