"""The built-in tools called directly: workspace confinement, file tools, shell, arguments."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from hearth.tools.base import Tool, ToolContext, ToolRefused, check_arguments
from hearth.tools.files import ListDir, ReadFile, WriteFile
from hearth.tools.shell import Shell
from tests.support.tools import SECRET, refusal, run


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for folders), to prove nothing changed."""
    return {
        str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
    }


# ---------------------------------------------------------------- confinement


def test_an_absolute_path_outside_is_refused(ctx: ToolContext, outside: Path) -> None:
    before = snapshot(outside)
    target = str(outside / "secret.txt")
    sentence = refusal(ReadFile(), {"path": target}, ctx)
    assert "outside the workspace" in sentence and SECRET.strip() not in sentence
    sentence = refusal(WriteFile(), {"path": target, "content": "owned"}, ctx)
    assert "outside the workspace" in sentence
    sentence = refusal(WriteFile(), {"path": str(outside / "new.txt"), "content": "x"}, ctx)
    assert "outside the workspace" in sentence
    assert "outside the workspace" in refusal(ListDir(), {"path": str(outside)}, ctx)
    assert snapshot(outside) == before


def test_an_absolute_path_inside_the_workspace_is_allowed(ctx: ToolContext,
                                                          workspace: Path) -> None:
    (workspace / "in.txt").write_text("inside")
    assert run(ReadFile(), {"path": str(workspace / "in.txt")}, ctx).output == "inside"


@pytest.mark.parametrize("raw", ["../outside/secret.txt", "a/../b.txt", "..", "a/..", "./../ws"])
def test_a_path_with_dotdot_is_refused_even_when_it_stays_inside(
    ctx: ToolContext, workspace: Path, outside: Path, raw: str
) -> None:
    (workspace / "a").mkdir()
    (workspace / "b.txt").write_text("inside")
    before_in, before_out = snapshot(workspace), snapshot(outside)
    for tool, args in ((ReadFile(), {"path": raw}),
                       (WriteFile(), {"path": raw, "content": "x"}),
                       (ListDir(), {"path": raw})):
        sentence = refusal(tool, args, ctx)
        assert "may not contain '..'" in sentence and raw in sentence
    assert snapshot(workspace) == before_in and snapshot(outside) == before_out


def test_a_symlink_to_a_file_outside_is_refused(ctx: ToolContext, workspace: Path,
                                                outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    before = snapshot(outside)
    sentence = refusal(ReadFile(), {"path": "link.txt"}, ctx)
    assert "symlink" in sentence and "outside the workspace" in sentence
    assert SECRET.strip() not in sentence
    sentence = refusal(WriteFile(), {"path": "link.txt", "content": "owned"}, ctx)
    assert "symlink" in sentence and "outside the workspace" in sentence
    assert snapshot(outside) == before
    assert (workspace / "link.txt").is_symlink()  # the link itself was not replaced either


def test_a_dangling_symlink_pointing_outside_cannot_create_a_file_there(
    ctx: ToolContext, workspace: Path, outside: Path
) -> None:
    (workspace / "new.txt").symlink_to(outside / "new.txt")
    sentence = refusal(WriteFile(), {"path": "new.txt", "content": "owned"}, ctx)
    assert "outside the workspace" in sentence
    assert not (outside / "new.txt").exists()


def test_a_symlinked_folder_pointing_outside_is_refused(ctx: ToolContext, workspace: Path,
                                                       outside: Path) -> None:
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    for tool, args in (
        (ReadFile(), {"path": "out/secret.txt"}),
        (WriteFile(), {"path": "out/secret.txt", "content": "owned"}),
        (WriteFile(), {"path": "out/new.txt", "content": "owned"}),
        (WriteFile(), {"path": "out/deeper/new.txt", "content": "owned"}),
        (ListDir(), {"path": "out"}),
    ):
        sentence = refusal(tool, args, ctx)
        assert "symlink" in sentence and "outside the workspace" in sentence, sentence
    assert snapshot(outside) == before  # no file and no folder appeared out there


def test_write_file_never_writes_through_a_symlink_at_its_temp_name(
    ctx: ToolContext, workspace: Path, outside: Path
) -> None:
    (workspace / ".notes.txt.hearth-tmp").symlink_to(outside / "secret.txt")
    before = snapshot(outside)
    with contextlib.suppress(ToolRefused):  # refusing is fine; writing outside is not
        run(WriteFile(), {"path": "notes.txt", "content": "owned"}, ctx)
    assert snapshot(outside) == before
    assert not (workspace / "notes.txt").is_symlink()


@pytest.mark.parametrize("tool", [ReadFile(), WriteFile(), ListDir()], ids=lambda t: t.name)
def test_a_symlink_loop_is_refused(ctx: ToolContext, workspace: Path, tool: Tool) -> None:
    (workspace / "loop").symlink_to("loop")
    (workspace / "a").symlink_to("b")
    (workspace / "b").symlink_to("a")
    for raw in ("loop", "a", "a/x.txt"):
        args = {"path": raw, "content": "x"} if tool.name == "write_file" else {"path": raw}
        sentence = refusal(tool, args, ctx)
        assert "cannot be resolved" in sentence and raw in sentence
    assert (workspace / "loop").is_symlink() and (workspace / "a").is_symlink()


@pytest.mark.parametrize("raw", ["", "   "])
def test_an_empty_path_is_refused(ctx: ToolContext, raw: str) -> None:
    assert "empty" in refusal(ReadFile(), {"path": raw}, ctx)
    assert "empty" in refusal(WriteFile(), {"path": raw, "content": "x"}, ctx)


def test_a_symlink_pointing_inside_the_workspace_is_allowed(ctx: ToolContext,
                                                            workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "note.txt").write_text("kept")
    (workspace / "alias.txt").symlink_to(workspace / "real" / "note.txt")
    (workspace / "folder").symlink_to("real", target_is_directory=True)
    assert run(ReadFile(), {"path": "alias.txt"}, ctx).output == "kept"
    assert run(ReadFile(), {"path": "folder/note.txt"}, ctx).output == "kept"
    run(WriteFile(), {"path": "alias.txt", "content": "changed"}, ctx)
    assert (workspace / "real" / "note.txt").read_text() == "changed"
    run(WriteFile(), {"path": "folder/other.txt", "content": "new"}, ctx)
    assert (workspace / "real" / "other.txt").read_text() == "new"
    assert run(ListDir(), {"path": "folder"}, ctx).receipt == "Listed 2 entries in real."


# ---------------------------------------------------------------- read_file


def test_read_file_reads_the_file_with_a_receipt(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "notes").mkdir()
    (workspace / "notes" / "todo.md").write_text("milk\neggs\n")
    outcome = run(ReadFile(), {"path": "notes/todo.md"}, ctx)
    assert outcome.output == "milk\neggs\n" and outcome.ok
    assert outcome.receipt == "Read 10 bytes from notes/todo.md."


def test_read_file_of_a_missing_file_is_refused_by_name(ctx: ToolContext,
                                                       workspace: Path) -> None:
    sentence = refusal(ReadFile(), {"path": "nowhere/missing.txt"}, ctx)
    assert "nowhere/missing.txt" in sentence and "no file" in sentence
    (workspace / "folder").mkdir()
    assert "no file" in refusal(ReadFile(), {"path": "folder"}, ctx)


def test_read_file_output_is_capped_with_a_marker(workspace: Path) -> None:
    (workspace / "big.txt").write_text("0123456789" * 10)
    ctx = ToolContext(workspace=workspace, session_key="k", run_id="r", output_chars=15)
    outcome = run(ReadFile(), {"path": "big.txt"}, ctx)
    assert outcome.output == "012345678901234\n[truncated]"
    assert "(truncated)" in outcome.receipt
    whole = run(ReadFile(), {"path": "big.txt"},
                ToolContext(workspace=workspace, session_key="k", run_id="r"))
    assert whole.output == "0123456789" * 10 and "truncated" not in whole.receipt


# ---------------------------------------------------------------- list_dir


def test_list_dir_sorts_marks_folders_and_counts(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "b.txt").write_text("bb")
    (workspace / "a.txt").write_text("a")
    (workspace / "c").mkdir()
    (workspace / "c" / "inner.txt").write_text("x")
    outcome = run(ListDir(), {}, ctx)
    assert outcome.output.splitlines() == ["a.txt  1 byte", "b.txt  2 bytes", "c/"]
    assert outcome.receipt == "Listed 3 entries in the workspace."
    one = run(ListDir(), {"path": "c"}, ctx)
    assert one.output == "inner.txt  1 byte" and one.receipt == "Listed 1 entry in c."
    (workspace / "empty").mkdir()
    empty = run(ListDir(), {"path": "empty"}, ctx)
    assert empty.output == "(empty folder)" and empty.receipt == "Listed 0 entries in empty."
    assert "no folder" in refusal(ListDir(), {"path": "a.txt"}, ctx)


# ---------------------------------------------------------------- write_file


def test_write_file_creates_folders_and_replaces_content(ctx: ToolContext,
                                                         workspace: Path) -> None:
    outcome = run(WriteFile(), {"path": "x/y/z.txt", "content": "hello world"}, ctx)
    assert (workspace / "x" / "y" / "z.txt").read_text() == "hello world"
    assert outcome.receipt == "Wrote 11 bytes to x/y/z.txt." and outcome.output == outcome.receipt
    again = run(WriteFile(), {"path": "x/y/z.txt", "content": "héllo"}, ctx)
    assert (workspace / "x" / "y" / "z.txt").read_text() == "héllo"  # replaced, no leftovers
    assert again.receipt == "Wrote 6 bytes to x/y/z.txt."
    assert sorted(p.name for p in (workspace / "x" / "y").iterdir()) == ["z.txt"]


def test_write_file_to_a_folder_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "keep.txt").write_text("keep")
    sentence = refusal(WriteFile(), {"path": "docs", "content": "x"}, ctx)
    assert "'docs'" in sentence and "folder" in sentence
    assert "folder" in refusal(WriteFile(), {"path": ".", "content": "x"}, ctx)
    assert (workspace / "docs").is_dir() and (workspace / "docs" / "keep.txt").read_text() == "keep"


# ---------------------------------------------------------------- shell


def test_shell_runs_in_the_workspace_and_reports_the_exit_code(ctx: ToolContext,
                                                               workspace: Path) -> None:
    outcome = run(Shell(), {"command": "pwd; echo oops >&2"}, ctx)
    lines = outcome.output.splitlines()
    assert lines[0] == str(workspace.resolve()) and "oops" in lines
    assert lines[-1] == "[exit code 0]" and outcome.ok
    assert outcome.receipt == "Ran `pwd; echo oops >&2` (exit 0)."
    failed = run(Shell(), {"command": "echo partial; exit 3"}, ctx)
    assert not failed.ok and failed.output.startswith("partial")
    assert failed.output.endswith("[exit code 3]") and "(exit 3)" in failed.receipt


def test_shell_refuses_an_empty_command(ctx: ToolContext) -> None:
    assert "empty" in refusal(Shell(), {"command": "   "}, ctx)


def test_shell_timeout_stops_the_whole_process_group(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_key="k", run_id="r", shell_timeout=1)
    started = time.monotonic()
    # a background child and the foreground command: both must die with the timeout
    outcome = run(Shell(), {"command": "(sleep 2; touch child) & sleep 2 && touch after"}, ctx)
    elapsed = time.monotonic() - started
    assert elapsed < 1.9, elapsed
    assert not outcome.ok
    assert "stopped after 1 seconds" in outcome.output
    assert "stopped after 1 s" in outcome.receipt
    time.sleep(max(0.0, 3.0 - (time.monotonic() - started)))
    assert not (workspace / "after").exists() and not (workspace / "child").exists()


def test_shell_timeout_argument_cannot_exceed_the_limit(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_key="k", run_id="r", shell_timeout=1)
    started = time.monotonic()
    outcome = run(Shell(), {"command": "sleep 5", "timeout": 100}, ctx)
    assert time.monotonic() - started < 3 and not outcome.ok
    assert "stopped after 1 seconds" in outcome.output


def test_shell_output_is_capped_with_a_marker(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_key="k", run_id="r", output_chars=100)
    outcome = run(Shell(), {"command": "printf 'x%.0s' $(seq 1000)"}, ctx)
    text, marker, code = outcome.output.split("\n")
    assert text == "x" * 100
    assert marker == "[output cut at 100 characters of 1000 bytes]" and code == "[exit code 0]"


def test_shell_environment_carries_no_secrets(ctx: ToolContext, workspace: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("HEARTH_TOKEN", "hearth-token-secret")
    assert os.environ["OPENAI_API_KEY"] == "sk-secret"
    outcome = run(Shell(), {"command": "env"}, ctx)
    for leaked in ("sk-secret", "sk-ant-secret", "hearth-token-secret",
                   "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_TOKEN"):
        assert leaked not in outcome.output
    variables = dict(line.split("=", 1) for line in outcome.output.splitlines() if "=" in line)
    assert variables["HOME"] == str(workspace) and "PATH" in variables  # the control


# ---------------------------------------------------------------- check_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "timeout": {"type": "integer"},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
    },
    "required": ["command"],
}


def test_check_arguments_accepts_good_arguments() -> None:
    assert check_arguments(SCHEMA, {"command": "ls"}) is None
    assert check_arguments(SCHEMA, {"command": "ls", "timeout": 5, "ratio": 0.5,
                                    "force": False}) is None
    assert check_arguments(SCHEMA, {"command": "ls", "ratio": 2}) is None


def test_check_arguments_names_a_missing_required_argument() -> None:
    problem = check_arguments(SCHEMA, {"timeout": 5})
    assert problem is not None and "'command'" in problem and "required" in problem


def test_check_arguments_names_an_unknown_argument() -> None:
    problem = check_arguments(SCHEMA, {"command": "ls", "cwd": "/"})
    assert problem is not None and "'cwd'" in problem and "command" in problem


@pytest.mark.parametrize("args", [
    {"command": "ls", "timeout": True},
    {"command": "ls", "timeout": "5"},
    {"command": "ls", "timeout": 1.5},
    {"command": 5},
    {"command": "ls", "force": 1},
])
def test_check_arguments_refuses_a_wrong_type(args: dict[str, Any]) -> None:
    problem = check_arguments(SCHEMA, args)
    wrong = next(name for name in args if name != "command") if len(args) > 1 else "command"
    assert problem is not None and f"'{wrong}'" in problem and "must be a" in problem


def test_check_arguments_refuses_a_bool_for_a_number() -> None:
    problem = check_arguments(SCHEMA, {"command": "ls", "ratio": True})
    assert problem is not None and "'ratio'" in problem
