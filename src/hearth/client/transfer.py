"""`hearth export` and `hearth import`: chats as JSON Lines, to and from a running gateway over
its HTTP API (`api.py`), with a progress bar (rich) on the error stream.

Export: one chat (its key) or every kept chat, streamed into the file (written beside it, then
renamed into place: a failed export leaves no half file), the bar counting chats. An
Incognito or Temporary chat is never exported: the gateway refuses it with its sentence, and
never lists it among all.

Import: the file is read line by line and cut into parts of whole chats under the gateway's
body limit, each with a header of its own (its count of chats) and the line its part starts
at, so the gateway names the file's own lines. Every part is checked first (`dry_run`), so a
file the gateway refuses is refused whole before anything is written; then each part is
imported, each chat as a new chat. The bar counts bytes.

Exit codes: 0 done, 1 the gateway refused (its sentence is shown), 3 it could not be reached.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from hearth.atomic import streaming_atomically
from hearth.client.api import GatewayApi, GatewayError, GatewayUnavailable

EXIT_REFUSED = 1
EXIT_NO_GATEWAY = 3
PART_BYTES = 3 * 1024 * 1024  # under the gateway's 4 MiB limit on a request's body
CHAT_LINE = b'{"type":"chat"'  # how each chat's first line begins, as the gateway writes it
STDOUT = "-"


class TransferFailed(Exception):
    """An export or import that did not finish: the sentence to show, and the exit code."""

    def __init__(self, sentence: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(sentence)
        self.code = code


def _failed(error: GatewayError) -> TransferFailed:
    code = EXIT_NO_GATEWAY if isinstance(error, GatewayUnavailable) else EXIT_REFUSED
    return TransferFailed(str(error), code)


def run_export(base_url: str, token: str, key: str | None, out: str | None) -> int:
    """`hearth export`'s exit code: one chat (`key`), or every kept chat (None), to `out`."""
    console = Console(stderr=True)
    api = GatewayApi(base_url, token)
    try:
        written, chats = export_chats(api, key, out, console)
    except TransferFailed as failed:
        console.print(str(failed), markup=False, highlight=False, soft_wrap=True)
        return failed.code
    finally:
        api.close()
    where = "standard output" if written is None else str(written)
    console.print(f"Exported {_chats(chats)} to {where}.", markup=False, highlight=False,
                  soft_wrap=True)
    return 0


def run_import(base_url: str, token: str, path: Path) -> int:
    """`hearth import`'s exit code: every chat of the file at `path`, each as a new chat."""
    console = Console(stderr=True)
    api = GatewayApi(base_url, token)
    try:
        made = import_chats(api, path, console)
    except TransferFailed as failed:
        console.print(str(failed), markup=False, highlight=False, soft_wrap=True)
        return failed.code
    finally:
        api.close()
    print(f"Imported {_chats(len(made))} from {path}.")
    for chat in made:
        title = f" “{chat['title']}”" if chat.get("title") else ""
        print(f"  {chat['key']}{title} (was {chat.get('from') or 'unnamed'}, "
              f"{chat['events']} events)")
        for note in chat.get("notes", []):
            print(f"    {note}")
    return 0


def _chats(count: int) -> str:
    return f"{count} chat" + ("" if count == 1 else "s")


def _progress(console: Console, *columns: Any) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), *columns,
                    TimeRemainingColumn(), console=console)


# ------------------------------------------------------------------ export


def export_chats(api: GatewayApi, key: str | None, out: str | None, console: Console
                 ) -> tuple[Path | None, int]:
    """Write the export to `out` (a path; `-`: standard output; None: the name the gateway
    gives, in this folder): where it went (None for standard output) and how many chats."""
    try:
        with api.export(key) as download, _progress(console, MofNCompleteColumn()) as bar:
            task = bar.add_task("Exporting", total=None)
            target = None if out == STDOUT else Path(out or download.filename or "chats.jsonl")
            with _destination(target) as sink:
                chats = _copy(download.chunks, sink, lambda: bar.advance(task),
                              lambda total: bar.update(task, total=total))
            return target, chats
    except GatewayError as error:
        raise _failed(error) from error


@contextlib.contextmanager
def _destination(target: Path | None) -> Iterator[BinaryIO]:
    """Where the bytes go: standard output, or a file beside `target` renamed over it once
    whole (removed if the export fails)."""
    if target is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    folder = target.resolve().parent
    if not folder.is_dir():
        raise TransferFailed(f"Cannot write {target}: there is no folder {folder}.")
    with streaming_atomically(target, mode=0o600) as sink:  # the owner's chats: theirs alone
        yield sink


def _copy(chunks: Iterator[bytes], sink: BinaryIO, chat_done: Callable[[], None],
          total_is: Callable[[int | None], None]) -> int:
    """Copy the stream to `sink` line by line (split on "\\n" alone: a line may hold U+2028):
    the number of chats it held. A stream whose chats are fewer than its header says is
    refused (a chat was deleted while it was exported)."""
    buffer = b""
    declared: int | None = None
    chats = 0
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if declared is None:
                declared = _declared(line)
                total_is(declared)
            elif line.startswith(CHAT_LINE):
                chats += 1
                chat_done()
            sink.write(line + b"\n")
    if buffer:
        sink.write(buffer)
    if declared is not None and chats != declared:
        raise TransferFailed(f"The gateway listed {_chats(declared)} and sent {chats}: a chat "
                             "was deleted while it was exported. Export again.")
    return chats


def _declared(header: bytes) -> int | None:
    with contextlib.suppress(ValueError):
        value = json.loads(header)
        if isinstance(value, dict) and isinstance(value.get("chats"), int):
            return int(value["chats"])
    return None


# ------------------------------------------------------------------ import


@dataclass
class Part:
    """A part of the file to send: whole chats, after a header of its own."""

    offset: int  # its line k > 1 is the file's line k + offset
    lines: list[bytes] = field(default_factory=list)
    chats: int = 0
    size: int = 0  # bytes of the file it holds


def import_chats(api: GatewayApi, path: Path, console: Console,
                 part_bytes: int = PART_BYTES) -> list[dict[str, Any]]:
    """Check every part of the file, then import each: the chats made, in order."""
    size = _size_of(path)
    made: list[dict[str, Any]] = []
    try:
        with _progress(console, DownloadColumn()) as bar:
            checking = bar.add_task("Checking", total=size)
            declared, found = _send_all(api, path, part_bytes, True,
                                        lambda part, _: bar.advance(checking, part.size))
            if declared is not None and declared != found:
                raise TransferFailed(
                    f"Line 1: the header says the file holds {declared} chats, and it holds "
                    f"{found}: the file was cut short. Nothing was imported.")
            importing = bar.add_task("Importing", total=size)

            def imported(part: Part, answer: dict[str, Any]) -> None:
                made.extend(answer.get("imported", []))
                bar.advance(importing, part.size)

            _send_all(api, path, part_bytes, False, imported)
    except GatewayError as error:
        failed = _failed(error)
        if made:
            keys = ", ".join(str(chat["key"]) for chat in made)
            raise TransferFailed(f"{failed} Imported before it stopped: {keys}.",
                                 failed.code) from error
        raise failed from error
    return made


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as error:
        raise TransferFailed(f"Cannot read {path}: {error.strerror or error}.") from error


def _send_all(api: GatewayApi, path: Path, part_bytes: int, dry_run: bool,
              done: Callable[[Part, dict[str, Any]], None]) -> tuple[int | None, int]:
    """Send every part (checked only, with `dry_run`): the chats the header declares and the
    chats found."""
    try:
        with path.open("rb") as file:
            header = file.readline().rstrip(b"\n")
            declared = _declared(header)
            found = 0
            for part in _parts(file, len(header) + 1, part_bytes):
                found += part.chats
                answer = api.import_part(_body(header, part, declared is not None),
                                         dry_run=dry_run, line_offset=part.offset)
                done(part, answer)
            return declared, found
    except OSError as error:
        raise TransferFailed(f"Cannot read {path}: {error.strerror or error}.") from error


def _body(header: bytes, part: Part, recount: bool) -> bytes:
    """The part as the gateway reads it: a header saying how many chats it holds (the file's
    own header, if it says no count: the gateway then names what is wrong with it)."""
    if recount:
        value = json.loads(header)
        value["chats"] = part.chats
        header = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return b"\n".join([header, *part.lines]) + b"\n"


def _parts(file: BinaryIO, header_size: int, part_bytes: int) -> Iterator[Part]:
    """The file's lines after the header, in parts of whole chats of about `part_bytes` (a
    chat longer than that is a part alone)."""
    part = Part(offset=0, size=header_size)
    chat: list[bytes] = []
    number = 1  # the file's line number of the last line read
    for raw in file:
        number += 1
        line = raw.rstrip(b"\n")
        if _starts_chat(line) and chat:
            part = yield from _placed(part, chat, number - len(chat), part_bytes)
            chat = []
        chat.append(line)
    if chat:
        part = yield from _placed(part, chat, number + 1 - len(chat), part_bytes)
    if part.lines or part.offset == 0:
        yield part


def _placed(part: Part, chat: list[bytes], first: int, part_bytes: int
            ) -> Generator[Part, None, Part]:
    """Add a chat (its lines, the first at file line `first`) to the part, or yield the part
    and start the next with it: the part now being filled (a generator's return value)."""
    size = sum(len(line) + 1 for line in chat)
    if part.lines and part.size + size > part_bytes:
        yield part
        part = Part(offset=first - 2)
    part.lines += chat
    part.chats += 1 if _starts_chat(chat[0]) else 0
    part.size += size
    return part


def _starts_chat(line: bytes) -> bool:
    if line.startswith(CHAT_LINE):
        return True
    if b'"chat"' not in line:
        return False
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("type") == "chat"

