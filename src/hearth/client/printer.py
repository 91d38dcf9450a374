"""How one turn's frames look in the terminal: its answer streamed as it comes, a line per
tool receipt, and how it ended when that was not a complete answer.

A stream that reconnects is sent the run's text so far again (one `delta` from offset 0) and
the messages it missed; the printer shows only what it has not shown yet, so nothing appears
twice and an answer that was never streamed (a reconnect after it, a provider that does not
stream) is still printed whole from its message. The streamed text of a run is its answer
messages one after the other, which is how a message's part already shown is known.

A gateway that restarted (`restarted`) counts its offsets from 0 again, and may replay the
answer that was streaming, kept as a partial message: that message is not shown again, and
what the resumed turn streams is shown as new.

A notice that is not the turn's ending (a turn resumed after a restart) is a line in brackets;
the ending's own notice is left to the `done` frame, which says the same.

The `done` frame carries the turn's answer (`answer_seq`, `answer`): an answer whose message
this connection never brought is drawn from it, so the end needs no read of the chat.
"""

from __future__ import annotations

from typing import Any

from hearth.client.terminal import Screen


class RunPrinter:
    """Draws the frames of run `run_id` on `screen`."""

    def __init__(self, screen: Screen, run_id: str) -> None:
        self.screen = screen
        self.run_id = run_id
        self._shown = 0  # the run's streamed text is on screen up to this offset
        self._start = 0  # the offset where the answer streaming now began
        self._streamed = ""  # what of the answer streaming now is on screen
        self._carried = ""  # what was on screen of the answer streaming at a restart
        self._answers: set[int] = set()  # the seqs of the answer messages drawn

    def delta(self, frame: dict[str, Any]) -> None:
        offset, text = int(frame.get("offset", 0)), str(frame.get("text", ""))
        end = offset + len(text)
        if end <= self._shown:
            return
        piece = text[max(0, self._shown - offset):]
        self.screen.text(piece)
        self._streamed += piece
        self._shown = end
        self._carried = ""  # the restarted gateway streams: what it replayed came before

    def message(self, message: dict[str, Any]) -> None:
        kind = message.get("kind")
        if kind == "assistant":
            if isinstance(message.get("index"), int):
                self._answers.add(message["index"])
            self._answer(str(message.get("text", "")))
        elif kind == "tool_result":
            receipt = (message.get("meta") or {}).get("receipt")
            if receipt:
                self.screen.line(f"  · {receipt}")
        elif kind == "notice" and not (message.get("meta") or {}).get("ending"):
            self.screen.line(f"[{message.get('text', '')}]")

    def restarted(self) -> None:
        """The gateway went away (a restart): its offsets start from 0 again."""
        self.screen.end_line()
        self._carried = self._streamed or self._carried
        self._shown = self._start = 0
        self._streamed = ""

    def done(self, frame: dict[str, Any]) -> str:
        """The run's end: its outcome (`complete`, `stopped`, `error`…), its sentence shown
        unless it is a complete answer; its answer first when no message brought it."""
        seq, answer = frame.get("answer_seq"), frame.get("answer")
        if isinstance(seq, int) and isinstance(answer, str) and seq not in self._answers:
            self._answers.add(seq)
            self._answer(answer)
        self.screen.end_line()
        outcome = str(frame.get("outcome", "error"))
        if outcome != "complete":
            self.screen.line(f"[{frame.get('ending', outcome)}] {frame.get('sentence', '')}")
        return outcome

    def _answer(self, text: str) -> None:
        """An answer message: the part of it not on screen yet, then the end of its line."""
        replayed = bool(self._carried) and not self._streamed  # the partial kept at a restart
        shown = self._carried if replayed else self._streamed
        if text.startswith(shown):
            self.screen.text(text[len(shown):])
        elif not shown.startswith(text):  # not the text streamed: shown whole, to lose nothing
            self.screen.end_line()
            self.screen.text(text)
        self.screen.end_line()
        if not replayed:  # (a replayed partial is no part of the restarted gateway's offsets)
            self._shown = max(self._shown, self._start + len(text))
        self._start = self._shown
        self._streamed = self._carried = ""
