"""The terminal chat's pieces without a gateway: how an approval is described and asked, how a
turn's frames are drawn across a reconnect, and what a second Ctrl-C during a stop does (the
moment between the two is too short to hit reliably through a pty)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hearth.client import approval, history
from hearth.client.api import EventStream
from hearth.client.printer import RunPrinter
from hearth.client.terminal import Screen
from hearth.client.turn import Leave, TurnFollower


def screen() -> tuple[Screen, io.StringIO]:
    out = io.StringIO()
    return Screen(out, io.StringIO()), out


# ---------------------------------------------------------------------------------- approvals


def test_a_write_without_a_preview_shows_its_path_and_first_lines() -> None:
    content = "\n".join(f"line {i}" for i in range(20))
    lines = approval.describe({"tool": "write_file", "target": "notes/a.md",
                               "arguments": {"path": "notes/a.md", "content": content}})
    assert lines[0] == "Approval needed: write_file on notes/a.md"
    assert "  | line 0" in lines and f"  | line {approval.SHOWN_LINES - 1}" in lines
    assert f"  | line {approval.SHOWN_LINES}" not in lines
    assert lines[-1] == f"  | … {20 - approval.SHOWN_LINES} more lines"


def test_an_edit_and_a_command_without_a_preview_show_the_change_and_the_command() -> None:
    edit = approval.describe({"tool": "edit_file", "target": "a.py", "arguments": {
        "path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}})
    assert edit[1:] == ["  - x = 1", "  + x = 2"]
    shell = approval.describe({"tool": "shell", "target": "rm -r build",
                               "arguments": {"command": "rm -r build"}})
    assert shell[1:] == ["  $ rm -r build"]


def test_the_gateways_preview_is_shown_when_there_is_one() -> None:
    view = {"tool": "edit_file", "target": "a.py",
            "arguments": {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"},
            "preview": {"kind": "edit", "path": "a.py", "old": "x = 1", "new": "x = 2",
                        "diff": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
                        "note": None}}
    assert approval.describe(view)[1:] == ["  -x = 1", "  +x = 2"]
    command = {"tool": "shell", "arguments": {"command": "make"},
               "preview": {"kind": "command", "command": "make", "elevated": True,
                           "note": "Only the first 4,000 characters are shown."}}
    assert approval.describe(command)[1:] == [
        "  $ make (outside the sandbox)", "  (Only the first 4,000 characters are shown.)"]


def test_always_is_offered_unless_the_view_says_it_may_not_be() -> None:
    assert approval.question({"tool": "shell"}) == "Allow shell? [o]nce, [a]lways, [d]eny? "
    assert approval.question({"tool": "shell", "always_allowed": False}) \
        == "Allow shell? [o]nce, [d]eny? "


class Answers(Screen):
    """A screen whose questions are answered from a list."""

    def __init__(self, *answers: str) -> None:
        super().__init__(io.StringIO(), io.StringIO())
        self.answers = list(answers)
        self.asked: list[str] = []

    def ask(self, prompt: str) -> str:
        self.asked.append(prompt)
        return self.answers.pop(0)


def test_always_where_it_is_not_offered_is_asked_again() -> None:
    asked = Answers("a", "d")
    view = {"tool": "write_file", "arguments": {}, "always_allowed": False}
    assert approval.decide(asked, view) == "deny"
    assert len(asked.asked) == 2


# ---------------------------------------------------------------------------------- drawing


def test_a_reconnect_shows_nothing_twice_and_an_unstreamed_answer_whole() -> None:
    drawn, out = screen()
    printer = RunPrinter(drawn, "r1")
    printer.delta({"offset": 0, "text": "Hello "})
    printer.delta({"offset": 0, "text": "Hello wor"})  # a new connection's text so far
    printer.delta({"offset": 6, "text": "world"})
    printer.message({"kind": "assistant", "text": "Hello world"})
    printer.message({"kind": "tool_result", "meta": {"receipt": "Wrote 3 bytes to a."}})
    printer.message({"kind": "assistant", "text": "Never streamed."})
    assert printer.done({"outcome": "stopped", "ending": "stopped",
                         "sentence": "You stopped this turn."}) == "stopped"
    assert out.getvalue() == ("Hello world\n  · Wrote 3 bytes to a.\nNever streamed.\n"
                              "[stopped] You stopped this turn.\n")


@pytest.mark.parametrize("kept", [False, True])
def test_after_a_restart_the_resumed_answer_is_shown_once(kept: bool) -> None:
    """The restarted gateway counts offsets from 0 again; the answer that was streaming may
    come back as a partial message (`kept`) before the resumed turn streams its own."""
    drawn, out = screen()
    printer = RunPrinter(drawn, "r1")
    printer.delta({"offset": 0, "text": "part one, "})
    printer.restarted()
    if kept:
        printer.message({"kind": "assistant", "text": "part one, "})
    printer.message({"kind": "notice", "text": "This turn was interrupted by a restart and "
                     "resumed.", "meta": {"recovered": True}})
    printer.delta({"offset": 0, "text": "resumed"})
    printer.message({"kind": "assistant", "text": "resumed"})
    assert out.getvalue() == ("part one, \n[This turn was interrupted by a restart and "
                              "resumed.]\nresumed\n")


def test_history_draws_a_tool_call_as_one_line() -> None:
    messages = [
        {"kind": "user", "text": "write it"},
        {"kind": "tool_call", "text": "write_file(...)", "content": {
            "call_id": "c1", "name": "write_file", "arguments": {"path": "a.txt"}}},
        {"kind": "tool_result", "text": "ok", "content": {"call_id": "c1"},
         "meta": {"receipt": "Wrote 2 bytes to a.txt."}},
        {"kind": "tool_call", "text": "shell(...)", "content": {
            "call_id": "c2", "name": "shell", "arguments": {"command": "ls"}}},
        {"kind": "assistant", "text": "Done."},
        {"kind": "notice", "text": "You stopped this turn.", "meta": {"ending": "stopped"}},
    ]
    assert history.lines(messages) == ["you> write it", "  · Wrote 2 bytes to a.txt.",
                                       "  · shell(ls)", "Done.",
                                       "[stopped] You stopped this turn."]
    assert history.lines(messages, shown=2) == ["Done.", "[stopped] You stopped this turn."]


class QuickRestartApi:
    """A gateway that restarts between two connections, back before the second one opens (no
    connection fails): the first stream ends mid-answer, the second is another start's."""

    def __init__(self) -> None:
        self.streams = [
            EventStream("boot-1", iter([
                {"type": "delta", "run_id": "r1", "offset": 0, "text": "part one, "}])),
            EventStream("boot-2", iter([
                {"type": "message", "seq": 3, "run_id": "r1", "message": {
                    "kind": "notice", "text": "Resumed.", "meta": {"recovered": True}}},
                {"type": "delta", "run_id": "r1", "offset": 0, "text": "the resumed answer"},
                {"type": "message", "seq": 4, "run_id": "r1", "message": {
                    "kind": "assistant", "text": "the resumed answer"}},
                {"type": "done", "run_id": "r1", "outcome": "complete"}])),
        ]

    @contextmanager
    def events(self, key: str, after: int) -> Iterator[EventStream]:
        yield self.streams.pop(0)


def test_a_restart_between_two_connections_is_seen_by_the_gateway_start() -> None:
    """No connection failed, so only the start id tells the restart: without it the resumed
    answer's offsets would be read as the old one's and printed from the middle."""
    out, err = io.StringIO(), io.StringIO()
    follower = TurnFollower(QuickRestartApi(), Screen(out, err), "k", "r1",  # type: ignore[arg-type]
                            after=0)
    assert follower.follow() == "complete"
    assert out.getvalue() == "part one, \n[Resumed.]\nthe resumed answer\n"
    assert "The gateway restarted" in err.getvalue()


class AnswerInDoneApi:
    """A gateway whose stream brings the answer's text streamed in part and then the `done`,
    which carries the whole answer, but not the answer's own message."""

    def __init__(self, with_message: bool) -> None:
        frames: list[dict[str, Any]] = [
            {"type": "delta", "run_id": "r1", "offset": 0, "text": "Beds go "}]
        if with_message:
            frames.append({"type": "message", "seq": 2, "run_id": "r1", "message": {
                "index": 2, "kind": "assistant", "text": "Beds go on the south side."}})
        frames.append({"type": "done", "run_id": "r1", "outcome": "complete", "ending":
                       "complete", "sentence": "The agent answered.", "answer_seq": 2,
                       "answer": "Beds go on the south side."})
        self.stream = EventStream("boot-1", iter(frames))

    @contextmanager
    def events(self, key: str, after: int) -> Iterator[EventStream]:
        yield self.stream


@pytest.mark.parametrize("with_message", [False, True])
def test_the_answer_is_drawn_once_from_the_done_frame_when_no_message_brought_it(
        with_message: bool) -> None:
    """The `done` frame carries the answer: the terminal draws the end from it, with no read
    of the chat, and an answer its message already drew is not drawn again."""
    drawn, out = screen()
    follower = TurnFollower(AnswerInDoneApi(with_message), drawn, "k", "r1",  # type: ignore[arg-type]
                            after=1)
    assert follower.follow() == "complete"
    assert out.getvalue() == "Beds go on the south side.\n"


# ---------------------------------------------------------------------------------- Ctrl-C


class InterruptedApi:
    """A gateway whose event stream is interrupted by Ctrl-C at each connection."""

    def __init__(self) -> None:
        self.stops = 0

    @contextmanager
    def events(self, key: str, after: int) -> Iterator[EventStream]:
        def frames() -> Iterator[dict[str, Any]]:
            yield {"type": "delta", "run_id": "r1", "offset": 0, "text": "thinking"}
            raise KeyboardInterrupt

        yield EventStream("boot-1", frames())

    def stop(self, key: str) -> str:
        self.stops += 1
        return "r1"


def test_a_second_ctrl_c_while_stopping_leaves() -> None:
    api = InterruptedApi()
    drawn, _ = screen()
    follower = TurnFollower(api, drawn, "k", "r1", after=0)  # type: ignore[arg-type]
    with pytest.raises(Leave, match="stopping"):
        follower.follow()
    assert api.stops == 1  # the first Ctrl-C asked for the stop; the second did not again
