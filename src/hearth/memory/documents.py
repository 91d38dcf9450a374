"""The markdown memory documents in `workspace/memory/`: MEMORY.md, preferences.md,
projects.md and the daily history (`history/YYYY-MM-DD.md`).

Owns the files: creating the standing ones, appending to the day's history, cutting from it
the lines that repeat a forgotten item, and splitting each file into passages for the index.
Every change asks `privacy.reach` first and is refused (RestrictedSession) for work that keeps
nothing; a temporary chat's work reads none of it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hearth.atomic import write_atomically
from hearth.privacy import reach

STANDING = {
    "MEMORY.md": "# Memory\n\nWhat I should remember about you and your world.\n",
    "preferences.md": "# Preferences\n\nHow you like things done.\n",
    "projects.md": "# Projects\n\nWhat you are working on.\n",
}
INJECTED = ("MEMORY.md", "preferences.md")  # put before every persistent turn
_STARTER_LINES = {ln.strip() for s in STANDING.values() for ln in s.splitlines() if ln.strip()}
PASSAGE_CHARS = 1000
MARKER = re.compile(r"<!-- memory:(\d+) -->")


@dataclass(frozen=True)
class Signature:
    mtime_ns: int
    size: int


class Documents:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.history = folder / "history"
        self._lock = threading.Lock()
        self.history_writes = 0  # this gateway's changes to the history files, counted

    def ensure(self) -> None:
        """Make the folder and any standing document that is missing (never overwrites)."""
        self.history.mkdir(parents=True, exist_ok=True)
        for name, starter in STANDING.items():
            path = self.folder / name
            if not path.exists():
                _write_atomically(path, starter)

    def signatures(self) -> dict[str, Signature]:
        return {**self.standing_signatures(), **self.history_signatures()}

    def standing_signatures(self) -> dict[str, Signature]:
        """The standing documents that exist, each with one stat."""
        out: dict[str, Signature] = {}
        for name in STANDING:
            try:
                info = os.stat(self.folder / name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            out[name] = Signature(info.st_mtime_ns, info.st_size)
        return out

    def history_signatures(self) -> dict[str, Signature]:
        """Each day's history file, from one scan of its folder (one stat a file)."""
        out: dict[str, Signature] = {}
        try:
            entries = list(os.scandir(self.history))
        except (FileNotFoundError, NotADirectoryError):
            return out
        for entry in entries:
            if entry.name.endswith(".md") and entry.is_file():
                info = entry.stat()
                out[f"history/{entry.name}"] = Signature(info.st_mtime_ns, info.st_size)
        return out

    def read(self, name: str, limit: int = 20_000) -> str:
        refusal = reach.read_refusal()
        if refusal is not None:
            raise reach.RestrictedSession(refusal)
        try:
            return (self.folder / name).read_text(encoding="utf-8", errors="replace")[:limit]
        except FileNotFoundError:
            return ""

    def passages(self, name: str) -> list[str]:
        """The file's passages for the index: paragraphs, long ones cut; history lines that
        repeat a kept item are left out (the item itself is indexed)."""
        out: list[str] = []
        for block in re.split(r"\n\s*\n", self.read(name, limit=2_000_000)):
            lines = [ln for ln in block.splitlines() if not MARKER.search(ln)]
            text = "\n".join(lines).strip()
            if not text or re.fullmatch(r"#+\s.*", text) or text in _STARTER_LINES:
                continue
            out += [text[i:i + PASSAGE_CHARS] for i in range(0, len(text), PASSAGE_CHARS)]
        return out

    def append_history(self, item_id: int, kind: str, words: str) -> None:
        """Add a line for a newly kept item to today's history."""
        _refuse_unless_keeping()
        said = " ".join(words.split()).replace("<!--", "<! --")  # no forged item marker
        line = (f"- {time.strftime('%H:%M')} {kind}: {said} "
                f"<!-- memory:{item_id} -->\n")
        path = self.history / f"{time.strftime('%Y-%m-%d')}.md"
        with self._lock:
            self.history.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                _write_atomically(path, f"# {time.strftime('%Y-%m-%d')}\n\n")
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line)
            self.history_writes += 1

    def cut_history(self, item_ids: Iterable[int]) -> int:
        """Remove the history lines that repeat these items; the count of lines removed."""
        _refuse_unless_keeping()
        wanted = {str(i) for i in item_ids}
        if not wanted or not self.history.is_dir():
            return 0
        removed = 0
        with self._lock:
            for path in sorted(self.history.glob("*.md")):
                lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
                kept = [ln for ln in lines
                        if not ((m := MARKER.search(ln)) and m.group(1) in wanted)]
                if len(kept) != len(lines):
                    removed += len(lines) - len(kept)
                    _write_atomically(path, "".join(kept))
                    self.history_writes += 1
        return removed


def _refuse_unless_keeping() -> None:
    refusal = reach.write_refusal("the memory documents were not changed")
    if refusal is not None:
        raise reach.RestrictedSession(refusal)


def _write_atomically(path: Path, text: str) -> None:
    write_atomically(path, text.encode("utf-8"), mode=0o600)
