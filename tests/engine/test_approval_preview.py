"""`engine.turn.approval.preview.preview`: what an approval card shows of a call, whatever the
model sent as its arguments (missing, of the wrong type, huge, nested, not even a dict)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from hearth.engine.turn.approval.preview import PREVIEW_CHARS, preview
from hearth.engine.views import sendable


def test_a_write_shows_path_and_content_whole_when_short() -> None:
    shown = preview("write_file", {"path": "notes/a.md", "content": "hello\n"})
    assert shown == {"kind": "write", "path": "notes/a.md", "content": "hello\n",
                     "truncated": False, "note": None}


def test_a_long_content_is_cut_with_a_note() -> None:
    shown = preview("write_file", {"path": "a", "content": "é" * 12_345})
    assert shown["content"] == "é" * PREVIEW_CHARS and shown["truncated"] is True
    assert shown["note"] == "Only the first 4,000 of 12,345 characters are shown."


def test_an_edit_is_a_unified_diff() -> None:
    shown = preview("edit_file", {"path": "src/app.py", "old_text": "x = 1\ny = 2\nz = 3\n",
                                  "new_text": "x = 1\ny = 20\nz = 3\n", "replace_all": True})
    assert shown["kind"] == "edit" and shown["replace_all"] is True
    assert shown["diff"].splitlines() == [
        "--- a/src/app.py", "+++ b/src/app.py", "@@ -1,3 +1,3 @@",
        " x = 1", "-y = 2", "+y = 20", " z = 3"]
    no_newline = preview("edit_file", {"path": "a", "old_text": "one", "new_text": "two"})
    assert no_newline["diff"].endswith("-one\n+two\n")  # every line ends, for a page to split


def test_a_huge_edit_is_diffed_quickly_and_cut() -> None:
    old = "\n".join(f"line {n}" for n in range(200_000))
    new = "\n".join(f"line {n + 1}" for n in range(200_000))
    began = time.monotonic()
    shown = preview("edit_file", {"path": "big", "old_text": old, "new_text": new})
    assert time.monotonic() - began < 0.5
    assert len(shown["diff"]) <= PREVIEW_CHARS and shown["truncated"] is True
    assert len(shown["old"]) == len(shown["new"]) == PREVIEW_CHARS and shown["note"]


def test_a_command_is_shown_as_it_is() -> None:
    shown = preview("shell", {"command": "rm -rf build && make", "elevated": True})
    assert (shown["kind"], shown["command"], shown["elevated"]) == (
        "command", "rm -rf build && make", True)
    assert preview("shell", {"command": "x", "elevated": "yes"})["elevated"] is False


HOSTILE: list[Any] = [
    None, "a string", 7, [1, 2], {}, {"path": None}, {"path": ["a"], "content": {"b": 1}},
    {"content": 10**5000}, {"command": [[[[[[[[["deep"]]]]]]]]]},
    {"old_text": "\ud800", "new_text": 5, "path": "\udfff"},
    {"content": float("nan"), "url": float("inf")}, {"x" * 10_000: "y" * 1_000_000},
]


@pytest.mark.parametrize("tool", ["write_file", "edit_file", "shell", "web_fetch", "mcp__x"])
@pytest.mark.parametrize("arguments", HOSTILE, ids=range(len(HOSTILE)))
def test_no_arguments_break_it(tool: str, arguments: Any) -> None:
    shown = preview(tool, arguments)
    encoded = json.dumps(sendable(shown), ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert len(encoded) < 4 * PREVIEW_CHARS * 3 + 2000  # every part bounded
    assert "\ud800" not in str(shown) and "\udfff" not in str(shown)
    assert isinstance(shown["kind"], str)


def test_another_tool_shows_its_arguments_in_brief() -> None:
    shown = preview("time__now", {"zone": "Europe/Lisbon", "big": "z" * 10_000})
    assert shown["kind"] == "call" and "Europe/Lisbon" in shown["arguments"]
    assert len(shown["arguments"]) < 600
