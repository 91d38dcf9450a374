"""edit_file, glob and grep called directly: their answers, refusals, caps and confinement."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hearth.tools.base import ToolContext, ToolOutcome
from hearth.tools.edit import EditFile
from hearth.tools.search import MAX_GLOB_RESULTS, MAX_GREP_MATCHES, Glob, Grep
from tests.support.tools import SECRET, refusal, run


def edit(ctx: ToolContext, path: str, old: str, new: str, **more: Any) -> ToolOutcome:
    return run(EditFile(), {"path": path, "old_text": old, "new_text": new, **more}, ctx)


def refused_edit(ctx: ToolContext, path: str, old: str, new: str, **more: Any) -> str:
    return refusal(EditFile(), {"path": path, "old_text": old, "new_text": new, **more}, ctx)


# ---------------------------------------------------------------- edit_file


def test_edit_replaces_a_unique_match(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "notes.md").write_text("# Notes\nmilk\neggs\n")
    outcome = edit(ctx, "notes.md", "eggs", "eggs\nbread")
    assert (workspace / "notes.md").read_text() == "# Notes\nmilk\neggs\nbread\n"
    assert outcome.ok and outcome.output == "Edited notes.md: replaced 1 occurrence at lines 3–4."
    assert outcome.receipt == "Edited notes.md: replaced 1 occurrence (18 bytes → 24 bytes)."
    one_line = edit(ctx, "notes.md", "milk", "oat milk")
    assert one_line.output == "Edited notes.md: replaced 1 occurrence at line 2."
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.md"]  # no temp file left


def test_edit_replace_all_replaces_every_occurrence(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\ny = x\nz = x + x\n")
    outcome = edit(ctx, "a.py", "x", "value\n#", replace_all=True)
    text = (workspace / "a.py").read_text()
    assert text.count("value") == 4 and "x" not in text
    assert "replaced 4 occurrences" in outcome.receipt
    assert text.splitlines() == [
        "value", "# = 1", "y = value", "#", "z = value", "# + value", "#"]
    assert outcome.output == "Edited a.py: replaced 4 occurrences at lines 1–2, 3–4, 5–6, 6–7."


def test_an_ambiguous_match_is_refused_and_the_file_unchanged(ctx: ToolContext,
                                                             workspace: Path) -> None:
    (workspace / "notes.md").write_text("todo\ntodo\ntodo\n")
    sentence = refused_edit(ctx, "notes.md", "todo", "done")
    assert sentence == (
        "Refused: the text to replace appears 3 times in notes.md; give more surrounding "
        "text so it is unique, or set replace_all."
    )
    assert (workspace / "notes.md").read_text() == "todo\ntodo\ntodo\n"


def test_text_not_found_is_refused_with_a_whitespace_hint(ctx: ToolContext,
                                                          workspace: Path) -> None:
    (workspace / "f.py").write_text("def f():\n\treturn  1\n")
    sentence = refused_edit(ctx, "f.py", "def f():\n    return 1", "x")
    assert "not found in f.py" in sentence and "whitespace" in sentence
    plain = refused_edit(ctx, "f.py", "def g()", "x")
    assert "not found in f.py" in plain and "whitespace" not in plain
    assert (workspace / "f.py").read_text() == "def f():\n\treturn  1\n"


def test_edit_refusals_say_why(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello")
    (workspace / "blob.bin").write_bytes(b"\xff\xfe hello \x00")
    assert "no file 'missing.txt'" in refused_edit(ctx, "missing.txt", "a", "b")
    assert "old_text is empty" in refused_edit(ctx, "a.txt", "", "b")
    assert "are the same" in refused_edit(ctx, "a.txt", "hello", "hello")
    assert "not UTF-8 text" in refused_edit(ctx, "blob.bin", "hello", "bye")
    (workspace / "folder").mkdir()
    assert "no file 'folder'" in refused_edit(ctx, "folder", "a", "b")
    assert (workspace / "a.txt").read_text() == "hello"
    assert (workspace / "blob.bin").read_bytes() == b"\xff\xfe hello \x00"


def test_edit_outside_the_workspace_is_refused(ctx: ToolContext, workspace: Path,
                                               outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    absolute = str(outside / "secret.txt")
    assert "outside the workspace" in refused_edit(ctx, absolute, "secret", "owned")
    assert "symlink" in refused_edit(ctx, "link.txt", "secret", "owned")
    assert "'..'" in refused_edit(ctx, "../outside/secret.txt", "secret", "owned")
    assert (outside / "secret.txt").read_text() == SECRET


def test_edit_keeps_crlf_line_endings(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    outcome = edit(ctx, "win.txt", "one\ntwo\n", "uno\ndos\ntres\n")
    assert (workspace / "win.txt").read_bytes() == b"uno\r\ndos\r\ntres\r\nthree\r\n"
    assert outcome.output.endswith("at lines 1–3.")
    edit(ctx, "win.txt", "three", "3\n3")  # a one-line match; the new text still gets CRLF
    assert (workspace / "win.txt").read_bytes() == b"uno\r\ndos\r\ntres\r\n3\r\n3\r\n"
    (workspace / "unix.txt").write_bytes(b"a\nb\n")
    edit(ctx, "unix.txt", "a\nb", "c\r\nd")  # an LF file takes the text as given
    assert (workspace / "unix.txt").read_bytes() == b"c\r\nd\n"


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755])
def test_edit_keeps_the_permission_bits(ctx: ToolContext, workspace: Path, mode: int) -> None:
    target = workspace / "run.sh"
    target.write_text("echo hi\n")
    target.chmod(mode)
    edit(ctx, "run.sh", "hi", "hello")
    assert target.read_text() == "echo hello\n"
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_edit_through_a_symlink_inside_edits_the_target(ctx: ToolContext,
                                                        workspace: Path) -> None:
    (workspace / "real.txt").write_text("old words")
    (workspace / "alias.txt").symlink_to("real.txt")
    outcome = edit(ctx, "alias.txt", "old", "new")
    assert (workspace / "real.txt").read_text() == "new words"
    assert (workspace / "alias.txt").is_symlink() and "real.txt" in outcome.receipt


def test_edit_never_writes_through_a_symlink_at_its_temp_name(
    ctx: ToolContext, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = iter(["taken", "fresh"])

    def candidates() -> Iterator[str]:
        return names

    # the first temp name tried is a link someone planted pointing outside
    monkeypatch.setattr(tempfile, "_get_candidate_names", candidates)
    (workspace / ".notes.md.taken.hearth-tmp").symlink_to(outside / "secret.txt")
    (workspace / ".notes.md.hearth-tmp").symlink_to(outside / "secret.txt")
    (workspace / "notes.md").write_text("draft\n")
    edit(ctx, "notes.md", "draft", "final")
    assert (outside / "secret.txt").read_text() == SECRET
    assert (workspace / "notes.md").read_text() == "final\n"
    assert not (workspace / "notes.md").is_symlink()
    assert os.readlink(workspace / ".notes.md.taken.hearth-tmp") == str(outside / "secret.txt")
    assert not (workspace / ".notes.md.fresh.hearth-tmp").exists()


# ---------------------------------------------------------------- glob


def make_tree(workspace: Path) -> None:
    for name in ("src/b.py", "src/a.py", "src/pkg/c.py", "README.md", "top.py",
                 ".git/hooks/x.py", "src/.git/y.py", ".hidden/h.py"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"# {name}\nTODO: fix {name}\n")


def test_glob_lists_matching_files_sorted(ctx: ToolContext, workspace: Path) -> None:
    make_tree(workspace)
    outcome = run(Glob(), {"pattern": "**/*.py"}, ctx)
    assert outcome.output.splitlines() == [
        ".hidden/h.py", "src/a.py", "src/b.py", "src/pkg/c.py", "top.py",
    ]  # nothing from a .git folder
    assert outcome.receipt == "Found 5 files matching **/*.py in the workspace."
    top_only = run(Glob(), {"pattern": "*.py"}, ctx)
    assert top_only.output == "top.py"
    in_src = run(Glob(), {"pattern": "*.py", "path": "src"}, ctx)
    assert in_src.output.splitlines() == ["src/a.py", "src/b.py"]
    assert in_src.receipt == "Found 2 files matching *.py in src."
    assert run(Glob(), {"pattern": "src/?.py"}, ctx).output.splitlines() == [
        "src/a.py", "src/b.py"]
    assert run(Glob(), {"pattern": "src/[!a].py"}, ctx).output == "src/b.py"
    none = run(Glob(), {"pattern": "**/*.rs"}, ctx)
    assert none.output == "(no files match)" and none.receipt.startswith("Found 0 files")


def test_glob_is_capped_and_says_so(ctx: ToolContext, workspace: Path) -> None:
    for index in range(MAX_GLOB_RESULTS + 7):
        (workspace / f"f{index:04d}.txt").write_text("")
    outcome = run(Glob(), {"pattern": "*.txt"}, ctx)
    lines = outcome.output.splitlines()
    assert len(lines) == MAX_GLOB_RESULTS + 1 and lines[0] == "f0000.txt"
    assert lines[-1] == f"[showing the first {MAX_GLOB_RESULTS} of {MAX_GLOB_RESULTS + 7} files]"
    assert "showing the first 500" in outcome.receipt


def test_glob_does_not_escape_through_symlinks(ctx: ToolContext, workspace: Path,
                                               outside: Path) -> None:
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    (workspace / "secret-link.txt").symlink_to(outside / "secret.txt")
    (workspace / "real").mkdir()
    (workspace / "real" / "note.txt").write_text("kept")
    (workspace / "alias").symlink_to("real", target_is_directory=True)
    (workspace / "loop").symlink_to("loop")
    (workspace / "self").symlink_to(".", target_is_directory=True)
    outcome = run(Glob(), {"pattern": "**/*"}, ctx)
    assert outcome.output.splitlines() == ["real/note.txt"]  # each real folder once
    assert "symlink" in refusal(Glob(), {"pattern": "*", "path": "out"}, ctx)


@pytest.mark.parametrize("pattern", ["../*", "src/../../outside/*", "..", "/etc/*", "~/x", ""])
def test_glob_refuses_an_escaping_pattern(ctx: ToolContext, pattern: str) -> None:
    sentence = refusal(Glob(), {"pattern": pattern}, ctx)
    assert any(word in sentence for word in ("'..'", "absolute", "empty")), sentence


def test_glob_refuses_a_path_outside_or_not_a_folder(ctx: ToolContext, workspace: Path,
                                                     outside: Path) -> None:
    (workspace / "a.txt").write_text("")
    assert "outside the workspace" in refusal(Glob(), {"pattern": "*", "path": str(outside)}, ctx)
    assert "'..'" in refusal(Glob(), {"pattern": "*", "path": "../outside"}, ctx)
    assert "no folder 'a.txt'" in refusal(Glob(), {"pattern": "*", "path": "a.txt"}, ctx)


# ---------------------------------------------------------------- grep


def test_grep_answers_path_line_text_sorted(ctx: ToolContext, workspace: Path) -> None:
    make_tree(workspace)
    (workspace / "src" / "a.py").write_text("one\nTODO first\nthree\nTODO: second\r\n")
    outcome = run(Grep(), {"pattern": r"TODO:?\s"}, ctx)
    assert outcome.output.splitlines() == [
        ".hidden/h.py:2: TODO: fix .hidden/h.py",
        "README.md:2: TODO: fix README.md",
        "src/a.py:2: TODO first",
        "src/a.py:4: TODO: second",
        "src/b.py:2: TODO: fix src/b.py",
        "src/pkg/c.py:2: TODO: fix src/pkg/c.py",
        "top.py:2: TODO: fix top.py",
    ]
    assert outcome.receipt == "Found 7 matches for 'TODO:?\\\\s' in 6 files."
    single = run(Grep(), {"pattern": "first", "path": "src/a.py"}, ctx)
    assert single.output == "src/a.py:2: TODO first"
    assert single.receipt == "Found 1 match for 'first' in 1 file."
    none = run(Grep(), {"pattern": "absent"}, ctx)
    assert none.output == "(no matches)" and none.receipt.startswith("Found 0 matches")


def test_grep_ignore_case_and_glob_filter(ctx: ToolContext, workspace: Path) -> None:
    make_tree(workspace)
    assert run(Grep(), {"pattern": "todo"}, ctx).output == "(no matches)"
    loud = run(Grep(), {"pattern": "todo", "ignore_case": True}, ctx)
    assert len(loud.output.splitlines()) == 6
    only_md = run(Grep(), {"pattern": "TODO", "glob": "*.md"}, ctx)
    assert only_md.output == "README.md:2: TODO: fix README.md"
    in_pkg = run(Grep(), {"pattern": "TODO", "glob": "pkg/*.py", "path": "src"}, ctx)
    assert in_pkg.output == "src/pkg/c.py:2: TODO: fix src/pkg/c.py"
    assert "'..'" in refusal(Grep(), {"pattern": "x", "glob": "../*"}, ctx)


def test_grep_skips_binary_and_oversized_files(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "text.txt").write_text("needle\n")
    (workspace / "blob.bin").write_bytes(b"needle\x00needle\n")
    (workspace / "huge.txt").write_bytes(b"needle\n" + b"x" * 5_000_000)
    outcome = run(Grep(), {"pattern": "needle"}, ctx)
    assert outcome.output.splitlines() == [
        "text.txt:1: needle", "[skipped 2 binary, unreadable or oversized file(s)]"]
    assert outcome.receipt == "Found 1 match for 'needle' in 1 file."


def test_grep_refuses_an_invalid_regex(ctx: ToolContext) -> None:
    sentence = refusal(Grep(), {"pattern": "(unclosed"}, ctx)
    assert "not a valid regular expression" in sentence and "missing )" in sentence
    assert "empty" in refusal(Grep(), {"pattern": ""}, ctx)


def test_grep_stays_inside_the_workspace(ctx: ToolContext, workspace: Path,
                                         outside: Path) -> None:
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    (workspace / "secret-link.txt").symlink_to(outside / "secret.txt")
    (workspace / "mine.txt").write_text("TODO mine\n")
    outcome = run(Grep(), {"pattern": "TODO"}, ctx)
    assert outcome.output == "mine.txt:1: TODO mine" and "secret" not in outcome.output
    for path in (str(outside), "../outside", "out", "secret-link.txt"):
        sentence = refusal(Grep(), {"pattern": "TODO", "path": path}, ctx)
        assert "outside the workspace" in sentence or "'..'" in sentence, sentence
    assert "no file or folder" in refusal(Grep(), {"pattern": "x", "path": "nope"}, ctx)


def test_grep_caps_matches_and_long_lines(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hit " + "y" * 400 + "\n")
    (workspace / "b.txt").write_text("hit\n" * (MAX_GREP_MATCHES + 50))
    outcome = run(Grep(), {"pattern": "hit"}, ctx)
    lines = outcome.output.splitlines()
    assert lines[0] == "a.txt:1: hit " + "y" * 296 + "…"
    assert lines[MAX_GREP_MATCHES - 1] == f"b.txt:{MAX_GREP_MATCHES - 1}: hit"
    assert lines[MAX_GREP_MATCHES:] == [
        "[lines longer than 300 characters were cut]",
        f"[stopped at {MAX_GREP_MATCHES} matches; narrow the pattern or path]",
    ]
    assert outcome.receipt == (
        f"Found over {MAX_GREP_MATCHES} matches for 'hit' in 2 files; "
        f"showing the first {MAX_GREP_MATCHES}."
    )
