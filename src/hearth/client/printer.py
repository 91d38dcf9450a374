"""How one turn's frames look in the terminal: its answer streamed as it comes, a line per
tool receipt, and how it ended when that was not a complete answer.

A stream that reconnects is sent the run's text so far again (one `delta` from offset 0) and
the messages it missed; the printer shows only what it has not shown yet, so nothing appears
twice and an answer that was never streamed (a reconnect after it, a provider that does not
stream) is still printed whole from its message.
"""

from __future__ import annotations

from typing import Any

from hearth.client.terminal import Screen


class RunPrinter:
    """Draws the frames of run `run_id` on `screen`."""

    def __init__(self, screen: Screen, run_id: str) -> None:
        self.screen = screen
        self.run_id = run_id
        self._shown = 0  # characters of the run's streamed text already on screen
        self._answered = 0  # characters of the run's answer messages seen so far

    def delta(self, frame: dict[str, Any]) -> None:
        offset, text = int(frame.get("offset", 0)), str(frame.get("text", ""))
        end = offset + len(text)
        if end <= self._shown:
            return
        self.screen.text(text[max(0, self._shown - offset):])
        self._shown = end

    def message(self, message: dict[str, Any]) -> None:
        kind = message.get("kind")
        if kind == "assistant":
            self._answer(str(message.get("text", "")))
        elif kind == "tool_result":
            receipt = (message.get("meta") or {}).get("receipt")
            if receipt:
                self.screen.line(f"  · {receipt}")

    def done(self, frame: dict[str, Any]) -> str:
        """The run's end: its outcome (`complete`, `stopped`, `error`…), its sentence shown
        unless it is a complete answer."""
        self.screen.end_line()
        outcome = str(frame.get("outcome", "error"))
        if outcome != "complete":
            self.screen.line(f"[{frame.get('ending', outcome)}] {frame.get('sentence', '')}")
        return outcome

    def _answer(self, text: str) -> None:
        """An answer message: the part of it no delta showed, then the end of its line."""
        unseen = max(0, self._answered + len(text) - self._shown)
        if unseen:
            self.screen.text(text[len(text) - unseen:])
        self._answered += len(text)
        self._shown = max(self._shown, self._answered)
        self.screen.end_line()
