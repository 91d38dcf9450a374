"""The documentation holds: every relative link in README.md, CONTRIBUTING.md and the pages
under docs/ leads to a file of this repository (never outside it: a user's clone has nothing
beside it), and every curl example in README.md and the pages runs as written against a real
gateway.

The examples run in the order the site gives them (`example_pages`: the README, then the pages
in mkdocs.yml's navigation, which keeps the order the README once gave its sections), one
reader's shell for all of them, each through `bash -c` in the clone's folder, against a gateway
started as a fresh `make run` leaves one: its token in the token file of its home (no
`HEARTH_TOKEN`), read by the docs' own `TOKEN=$(.venv/bin/hearth token)`. The gateway listens
on a free port, given to the examples' shell as `HEARTH_PORT` (as a reader who started the
gateway with it has it): the docs' own `PORT=${HEARTH_PORT:-8765}` reads it, and every curl
example calls `http://127.0.0.1:$PORT` (`README_URL`), none a port of its own. One thing
differs from a reader's shell: curl reads a config file of this test's (`CURL_HOME`) that
reports each answer's status on stderr and caps the time a command may take (a live event
stream, `curl -N`, is ended after a moment). A variable the docs ask the reader to fill from an
earlier answer (`CAPTURED`) is filled the same way here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from docs.gen import module_map
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Gateway, write_config
from tests.inprocess import InProcessGateway

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_URL = "http://127.0.0.1:$PORT"  # where the README's examples say the gateway is
SHELL_HAS = ("PWD", "HOME", "HEARTH_PORT")  # variables a reader's shell has before any example
SHELL_LANGUAGES = {"sh", "bash", "console", "shell"}
STREAM_SECONDS = 2  # how long a `curl -N` example (a live event stream) is read
COMMAND_SECONDS = 20

# Variables a README example uses that an earlier answer fills: the reader is told (in prose
# naming the variable) to keep a field of that answer. name -> (method, path, JSON field)
CAPTURED = {
    "RUN": ("POST", "/api/sessions/notes/messages", "run_id"),
    "ITEM": ("POST", "/api/memory", "id"),
    "JOB": ("POST", "/api/jobs", "id"),
    "FILE": ("POST", "/api/sessions/notes/attachments", "id"),
}


def doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


# the site's pages that are files outside docs/ (docs/gen/hooks.py): page -> file
OUTSIDE_DOCS = {"index.md": ROOT / "README.md", "contributing.md": ROOT / "CONTRIBUTING.md"}


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for item in nav:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def site_pages() -> list[str]:
    """The site's pages in its navigation's order (index.md is the README)."""
    with (ROOT / "mkdocs.yml").open(encoding="utf-8") as file:
        return _nav_pages(yaml.safe_load(file)["nav"])


def example_pages() -> list[Path]:
    """The files whose examples run, in the site's order: the README first."""
    return [OUTSIDE_DOCS.get(page, ROOT / "docs" / page) for page in site_pages()]


def examples_text() -> str:
    """Every page's text, one after the other, as one reader reads them in order."""
    return "\n\n".join(page.read_text("utf-8") for page in example_pages())


# ---------------------------------------------------------------------------------- links

FENCE = re.compile(r"^([ \t]*)(```|~~~)([^\n]*)\n(.*?)^[ \t]*\2[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
WEB_SCHEMES = ("http:", "https:", "mailto:")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def without_blocks(text: str) -> str:
    """The text with its fenced code blocks blanked out (their lines kept, empty)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def prose(text: str) -> str:
    """The text with its fenced code blocks and code spans blanked out (links there are
    examples, not links)."""
    return CODE_SPAN.sub(" ", without_blocks(text))


def link_targets(text: str) -> list[str]:
    """Every link target in a Markdown text: inline links and images, reference definitions,
    and HTML href/src attributes, outside code."""
    body = prose(text)
    return [*INLINE_LINK.findall(body), *REFERENCE_DEF.findall(body), *HTML_LINK.findall(body)]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(without_blocks(text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found |= set(re.findall(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""", text, re.I))
    return found


def repository_files(root: Path) -> set[Path]:
    """The repository's files: tracked, or new and not ignored (so a document being written
    can link a file not yet committed, and never one of .venv/ or test-artifacts/). Outside a
    git checkout (an unpacked archive), every file but those of the folders git ignores."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        ignored = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                   "test-artifacts", "build", "dist"}
        return {path.resolve() for path in root.rglob("*") if path.is_file()
                and not ignored & set(path.relative_to(root).parts)}
    return {(root / name).resolve() for name in listed.split("\0") if name}


def link_problems(doc: Path, text: str, root: Path, files: set[Path]) -> list[str]:
    """What is wrong with the links of one document: a target outside the repository (an
    absolute path, `file:`, a `../` that leaves it), one that leads to no file of it, an
    anchor no heading makes."""
    problems: list[str] = []
    root = root.resolve()
    for target in link_targets(text):
        where = f"{doc.name}: link to {target!r}"
        if not target:
            problems.append(f"{where}: empty")
            continue
        if target.startswith(WEB_SCHEMES):
            continue
        if SCHEME.match(target) or target.startswith(("/", "\\", "~")):
            problems.append(f"{where}: points outside the repository")
            continue
        path_part, _, fragment = target.partition("#")
        path_part = path_part.split("?", 1)[0]
        resolved = (doc.parent / path_part).resolve() if path_part else doc.resolve()
        if not resolved.is_relative_to(root):
            problems.append(f"{where}: points outside the repository")
            continue
        is_dir = any(resolved in f.parents for f in files)
        if resolved not in files and not is_dir:
            problems.append(f"{where}: no such file in the repository")
            continue
        if fragment and resolved.suffix == ".md" and resolved.is_file():
            target_text = text if resolved == doc.resolve() else resolved.read_text("utf-8")
            if fragment not in anchors(target_text):
                problems.append(f"{where}: no heading makes the anchor #{fragment}")
    return problems


def test_every_relative_link_leads_to_a_file_of_the_repository() -> None:
    files = repository_files(ROOT)
    docs = doc_files()
    assert (ROOT / "docs" / "architecture.md") in docs
    problems = [p for doc in docs for p in link_problems(doc, doc.read_text("utf-8"), ROOT, files)]
    assert problems == []


MODULE_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|html|js|css|toml))`")
PATH_ROOTS = ("", "src/", "src/hearth/")  # a path is named from the repository, src/ or the package


def missing_paths(text: str, root: Path) -> list[str]:
    """The files a document names in code spans (`engine/turn/runner.py`, with at least one
    folder) that are not in the repository under any of `PATH_ROOTS`."""
    named = set(MODULE_PATH.findall(text))
    return sorted(p for p in named if not any((root / base / p).is_file() for base in PATH_ROOTS))


def test_every_module_path_the_docs_name_exists() -> None:
    """The architecture's four places, its map and CONTRIBUTING name files by path: a move
    that leaves one behind fails here, not in a newcomer's first five minutes."""
    contributors = [ROOT / "docs" / "architecture.md", ROOT / "CONTRIBUTING.md"]  # the
    # README's paths are the user's home folder's (`history/YYYY-MM-DD.md`), not files here;
    # so are some the module map quotes from docstrings (the map is held to the tree itself)
    problems = {doc.name: missing_paths(without_module_map(doc.read_text("utf-8")), ROOT)
                for doc in contributors}
    assert {name: found for name, found in problems.items() if found} == {}


def without_module_map(text: str) -> str:
    """The text without the module map docs/gen writes (tests/test_docs_generated.py)."""
    return text.replace(module_map.section(text), "") if module_map.BEGIN in text else text


def test_positive_control_a_path_that_moved_is_flagged() -> None:
    text = ("admitted in `src/hearth/engine/intake/admission.py`, run by `engine/turn/runner.py`,"
            " persisted through `engine/turn/record.py`, the map in `web/pages/nowhere.py`")
    assert missing_paths(text, ROOT) == ["engine/turn/record.py", "web/pages/nowhere.py"]


def test_the_readme_links_to_the_architecture() -> None:
    assert "docs/architecture.md" in link_targets(README.read_text("utf-8"))


def test_positive_control_the_link_checker_flags_planted_bad_links(tmp_path: Path) -> None:
    """Each planted bad link is flagged; the good ones and links inside code are not."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## A part\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("beside the repository\n", encoding="utf-8")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n\n## A part\n", encoding="utf-8")
    doc = root / "README.md"
    text = (
        "# Title\n\n## Set up\n\n"
        "[design](../shared/DESIGN.md) [beside](../outside.md) [abs](/etc/passwd) "
        "[home](~/notes.md) [file](file:///etc/hosts) [gone](docs/missing.md) "
        "[no anchor](#no-such-heading) [no anchor there](docs/guide.md#nowhere)\n"
        '<a href="../shared/x.md">x</a>\n\n[ref]: ../shared/ref.md\n\n'
        "[ok](docs/guide.md) [part](docs/guide.md#a-part) [here](#set-up) [dir](docs) "
        "[web](https://example.com/a) [mail](mailto:me@example.com)\n"
        "`[in code](../shared/DESIGN.md)`\n\n```md\n[in a block](../shared/DESIGN.md)\n```\n"
    )
    doc.write_text(text, encoding="utf-8")
    files = {doc.resolve(), (root / "docs" / "guide.md").resolve()}
    flagged = [p.split(": ")[1] for p in link_problems(doc, text, root, files)]
    assert flagged == [
        "link to '../shared/DESIGN.md'", "link to '../outside.md'", "link to '/etc/passwd'",
        "link to '~/notes.md'", "link to 'file:///etc/hosts'", "link to 'docs/missing.md'",
        "link to '#no-such-heading'", "link to 'docs/guide.md#nowhere'",
        "link to '../shared/ref.md'", "link to '../shared/x.md'",
    ]


# ---------------------------------------------------------------------- the curl examples

@dataclass
class Command:
    text: str  # as the README writes it, continuation lines joined

    @property
    def is_curl(self) -> bool:
        return self.text.split(None, 1)[0] == "curl" if self.text.strip() else False

    @property
    def assigns(self) -> str | None:
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", self.text)
        return match.group(1) if match else None

    @property
    def expected(self) -> int | None:
        """The status the README says it answers (`# → 201`), if it says one."""
        match = re.search(r"#\s*→\s*(\d{3})\b", self.text)
        return int(match.group(1)) if match else None

    @property
    def streams(self) -> bool:
        return bool(re.search(r"\s(-N|--no-buffer)\b", self.text))

    @property
    def variables(self) -> set[str]:
        return set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", _unquoted(self.text)))

    @property
    def method_and_path(self) -> tuple[str, str]:
        method = re.search(r"-X\s+([A-Z]+)", self.text)
        path = re.search(re.escape(README_URL) + r"(/[^\s\"'?]*)", self.text)
        return (method.group(1) if method else "GET"), (path.group(1) if path else "")


def _unquoted(text: str) -> str:
    """The text without what single quotes hold (the shell expands nothing there)."""
    return re.sub(r"'[^']*'", "''", text)


def shell_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order; an indented block is dedented."""
    blocks = []
    for match in FENCE.finditer(text):
        indent = len(match.group(1))
        lines = [line[indent:] if line[:indent].strip() == "" else line
                 for line in match.group(4).splitlines()]
        blocks.append((match.group(3).strip().split(" ")[0].lower(), "\n".join(lines)))
    return blocks


def commands_of(language: str, body: str) -> list[str]:
    """A shell block's commands: continuation lines joined; in a `console` block only the
    lines after a `$ ` prompt (the rest is output)."""
    commands: list[str] = []
    pending: str | None = None
    for line in body.splitlines():
        if pending is not None:
            pending += "\n" + line
        elif language == "console":
            if not line.startswith("$ "):
                continue
            pending = line[2:]
        else:
            pending = line
        if pending.endswith("\\"):
            continue
        if pending.strip() and not pending.lstrip().startswith("#"):
            commands.append(pending)
        pending = None
    if pending is not None and pending.strip():
        commands.append(pending)
    return commands


def readme_commands(text: str) -> list[Command]:
    """The commands of the shell blocks that hold a curl example, in the README's order."""
    found: list[Command] = []
    for language, body in shell_blocks(text):
        if language not in SHELL_LANGUAGES:
            continue
        commands = [Command(c) for c in commands_of(language, body)]
        if any(c.is_curl for c in commands):
            found += commands
    return found


def static_problems(text: str) -> list[str]:
    """What a reader would trip over before running anything: a curl example outside a shell
    block, a body sent without its JSON Content-Type, an API call without the token, an
    address other than the README's."""
    problems = []
    for language, body in shell_blocks(text):
        if re.search(r"^\s*(\$ )?curl\s", body, re.M) and language not in SHELL_LANGUAGES:
            problems.append(f"a curl example in a ```{language or '(no language)'} block")
    for command in readme_commands(text):
        if not command.is_curl:
            continue
        said = command.text.splitlines()[0]
        if re.search(r"\s(-d|--data\S*)\s", command.text) and (
                "-H 'Content-Type: application/json'" not in command.text
                and "--data-binary" not in command.text):  # an upload: its bytes as they are
            problems.append(f"sends a body without -H 'Content-Type: application/json': {said}")
        if "/api/" in command.text and '-H "Authorization: Bearer $TOKEN"' not in command.text:
            problems.append(f'calls the API without -H "Authorization: Bearer $TOKEN": {said}')
        if README_URL not in command.text:
            problems.append(f"does not call the gateway at {README_URL}: {said}")
    return problems


def test_every_curl_example_says_its_body_is_json_and_carries_the_token() -> None:
    assert static_problems(examples_text()) == []


def test_positive_control_a_form_encoded_example_is_flagged() -> None:
    planted = (f"```sh\ncurl -s -X POST {README_URL}/api/sessions \\\n"
               "  -H \"Authorization: Bearer $TOKEN\" -d '{}'\n"
               "curl -s http://localhost:8765/api/jobs\n```\n```text\ncurl -s x\n```\n")
    assert static_problems(planted) == [
        "a curl example in a ```text block",
        "sends a body without -H 'Content-Type: application/json': "
        f"curl -s -X POST {README_URL}/api/sessions \\",
        'calls the API without -H "Authorization: Bearer $TOKEN": '
        "curl -s http://localhost:8765/api/jobs",
        f"does not call the gateway at {README_URL}: curl -s http://localhost:8765/api/jobs",
    ]


@dataclass
class Runner:
    """Runs README commands in order, as a reader's shell in the clone's folder would."""

    gateway: Gateway
    curl_home: Path
    values: dict[str, str] = field(default_factory=dict)  # TOKEN, and what CAPTURED filled
    outputs: list[tuple[Command, int, str]] = field(default_factory=list)

    def env(self, streams: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_", "CURL_"))}
        env["HEARTH_HOME"] = str(self.gateway.home)  # the gateway's home, as a reader's is
        env["HEARTH_PORT"] = str(self.gateway.port)  # and its port, as the reader set it
        env["CURL_HOME"] = str(self.curl_home / ("stream" if streams else "plain"))
        return {**env, **self.values}

    def run(self, command: Command) -> list[str]:
        """Run one command; what went wrong with it (nothing: [])."""
        missing = sorted(v for v in command.variables
                         if v not in self.values and v not in SHELL_HAS)
        if missing:
            return [f"uses ${', $'.join(missing)}, which nothing before it sets: {command.text}"]
        if command.assigns and not command.is_curl:
            return self._assign(command)
        if command.is_curl:
            return self._curl(command)
        return []  # not an HTTP example (`.venv/bin/hearth chat`, …)

    def _assign(self, command: Command) -> list[str]:
        name = command.assigns
        script = f'{command.text}\nprintf %s "${name}"'
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=self.env(False),
                              capture_output=True, text=True, timeout=COMMAND_SECONDS)
        if done.returncode != 0 or not done.stdout.strip():
            return [f"{command.text!r} set nothing (exit {done.returncode}): {done.stderr}"]
        assert name is not None
        self.values[name] = done.stdout.strip()
        return []

    def _curl(self, command: Command) -> list[str]:
        done = subprocess.run(["bash", "-c", command.text], cwd=ROOT, env=self.env(command.streams),
                              capture_output=True, text=True, timeout=COMMAND_SECONDS + 5)
        statuses = re.findall(r"^HEARTH-STATUS (\d{3})$", done.stderr, re.M)
        said = command.text.splitlines()[0]
        if len(statuses) != 1:
            return [f"no answer (exit {done.returncode}, {done.stderr.strip()!r}): {said}"]
        status = int(statuses[0])
        self.outputs.append((command, status, done.stdout))
        timed_out = done.returncode == 28 and command.streams
        if done.returncode != 0 and not timed_out:
            return [f"exit {done.returncode}: {said}"]
        wanted = command.expected
        if (status != wanted) if wanted is not None else not 200 <= status < 300:
            return [f"answered {status} (wanted {wanted or '2xx'}): {said}\n{done.stdout}"]
        if command.streams and "data: " not in done.stdout:
            return [f"streamed no event: {said}"]
        self._capture(command, done.stdout)
        return []

    def _capture(self, command: Command, output: str) -> None:
        for name, (method, path, key) in CAPTURED.items():
            if command.method_and_path == (method, path):
                self.values[name] = str(json.loads(output)[key])


needs_curl = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None,
                                reason="the README's examples need curl and bash")


@pytest.fixture(scope="module")
def fresh_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway as `make run` leaves one: its token made into its home's token file (no
    HEARTH_TOKEN), its one model the scripted model server (answering "ok")."""
    with ScriptedModelServer() as server:
        home = tmp_path_factory.mktemp("docs") / "home"
        write_config(home, server.openai_base_url)
        gateway = InProcessGateway(home, {"HEARTH_TOKEN": ""}).start()
        try:
            yield gateway
        finally:
            gateway.kill()


@pytest.fixture
def runner(fresh_gateway: Gateway, tmp_path: Path) -> Runner:
    for name, seconds in (("plain", COMMAND_SECONDS), ("stream", STREAM_SECONDS)):
        (tmp_path / name).mkdir()
        (tmp_path / name / ".curlrc").write_text(
            f'write-out = "%{{stderr}}\\nHEARTH-STATUS %{{http_code}}\\n"\n'
            f"max-time = {seconds}\n", encoding="utf-8")
    return Runner(fresh_gateway, tmp_path)


@needs_curl
def test_the_docs_curl_examples_run_as_written(runner: Runner) -> None:
    """Every curl example of the README and the docs pages, in the site's order."""
    pages = example_pages()
    assert pages[0] == README and ROOT / "docs" / "http-api.md" in pages
    text = examples_text()
    commands = readme_commands(text)
    assert sum(c.is_curl for c in commands) >= 10, "the docs' curl examples were not found"
    said = without_blocks(text)
    for name in CAPTURED:  # the reader is told what to keep in each variable the test fills
        assert f"`{name}`" in said, f"the docs never say what ${name} holds"
    problems = [p for command in commands for p in runner.run(command)]
    assert problems == []
    assert "TOKEN" in runner.values and set(CAPTURED) <= set(runner.values)
    assert runner.values["PORT"] == str(runner.gateway.port)  # the README's PORT, from HEARTH_PORT


@needs_curl
def test_positive_control_the_runner_flags_examples_that_fail(runner: Runner) -> None:
    """A form-encoded body (no Content-Type) answers 422, a wrong status said is caught, an
    unset variable is caught: each is reported, none passes."""
    port, token = Command("PORT=${HEARTH_PORT:-8765}"), Command("TOKEN=$(.venv/bin/hearth token)")
    assert runner.run(port) == [] and runner.run(token) == []
    form = Command(f"curl -s -X POST {README_URL}/api/sessions "
                   "-H \"Authorization: Bearer $TOKEN\" -d '{\"name\": \"x\"}'")
    wrong = Command(f'curl -s -H "Authorization: Bearer $TOKEN" {README_URL}/api/jobs'
                    "   # → 201")
    unset = Command(f'curl -s -H "Authorization: Bearer $TOKEN" {README_URL}/api/runs/$NOPE')
    (form_problem,) = runner.run(form)
    assert form_problem.startswith("answered 422 (wanted 2xx)"), form_problem
    (wrong_problem,) = runner.run(wrong)
    assert wrong_problem.startswith("answered 200 (wanted 201)"), wrong_problem
    (unset_problem,) = runner.run(unset)
    assert unset_problem.startswith("uses $NOPE, which nothing before it sets")
