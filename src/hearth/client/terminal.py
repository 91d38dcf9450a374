"""The terminal the chat runs in: what is written where, and the questions asked at the prompt.

The answer streams to `out` (stdout), a piece at a time; whole lines (a receipt, an approval, a
past message) start on a line of their own, so a line is ended first when the answer stopped in
the middle of one. Notes about the chat itself (how to leave, a stop, an error) go to `err`.
The prompt is `input()`, with readline's line editing and history when the terminal has it.
"""

from __future__ import annotations

import sys
from typing import TextIO

try:  # line editing and history at the prompt; absent on some platforms, and then not needed
    import readline
except ImportError:  # pragma: no cover - every Linux and macOS Python has it
    readline = None  # type: ignore[assignment]


class Screen:
    """Where the chat writes: the answer and its lines to `out`, notes to `err`."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._mid_line = False  # the last thing written to `out` did not end its line

    def text(self, piece: str) -> None:
        """A piece of the streamed answer, as it comes."""
        if not piece:
            return
        self.out.write(piece)
        self.out.flush()
        self._mid_line = not piece.endswith("\n")

    def line(self, text: str = "") -> None:
        """A whole line of the chat (a receipt, a past message, an approval's part)."""
        self.end_line()
        self.out.write(text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """A line about the chat itself, not part of it."""
        self.end_line()
        self.err.write(text + "\n")
        self.err.flush()

    def end_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False

    def ask(self, prompt: str, prefill: str = "") -> str:
        """One line typed at `prompt` (EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C),
        starting from `prefill` where the terminal has line editing."""
        self.end_line()
        self.err.flush()
        if not prefill or readline is None:
            return input(prompt)
        readline.set_startup_hook(lambda: readline.insert_text(prefill))
        try:
            return input(prompt)
        finally:
            readline.set_startup_hook(None)


def typed_so_far() -> str:
    """What was on the prompt's line when Ctrl-C came ("" without readline)."""
    return readline.get_line_buffer() if readline is not None else ""
